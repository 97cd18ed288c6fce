//! The flags of `certs`: `generate` into files, `bootstrap` in a cluster.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Subcommand};

use super::{client::ClientArgs, duration::Seconds};
use crate::tls::certs::{self, CertError, DEFAULT_VALIDITY_DAYS, bootstrap};

#[derive(Args, Debug)]
pub(crate) struct CertsArgs {
    #[command(subcommand)]
    pub(crate) command: CertsCommand,
}

#[derive(Subcommand, Debug)]
pub(crate) enum CertsCommand {
    /// Write a new CA and a serving certificate for the webhook Service into a directory
    /// (ca.crt, tls.crt, tls.key).
    Generate(GenerateArgs),
    /// In a cluster: create or renew the serving Secret, and put its CA into the caBundle of
    /// every webhook of the MutatingWebhookConfiguration.
    Bootstrap(BootstrapArgs),
}

#[derive(Args, Debug)]
pub(crate) struct GenerateArgs {
    /// Name of the webhook's Service.
    #[arg(long, default_value = "ingress-status-guard")]
    pub(crate) service: String,
    /// Namespace of the webhook's Service.
    #[arg(long, default_value = "ingress-status-guard")]
    pub(crate) namespace: String,
    /// Directory to write ca.crt, tls.crt and tls.key into (created if missing).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Validity of the CA and the serving certificate, in days.
    #[arg(long, default_value_t = DEFAULT_VALIDITY_DAYS, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) validity_days: u32,
    /// Replace existing files in --out.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print the caBundle (base64 of ca.crt) on stdout, for a webhook configuration.
    #[arg(long)]
    pub(crate) print_ca_bundle: bool,
}

#[derive(Args, Debug)]
pub(crate) struct BootstrapArgs {
    /// Name of the webhook's Service (the certificate is for `<service>.<namespace>.svc`).
    #[arg(long, default_value = "ingress-status-guard")]
    pub(crate) service: String,
    /// Namespace of the Service and of the Secret.
    #[arg(long, env = "POD_NAMESPACE")]
    pub(crate) namespace: String,
    /// The serving Secret to create or renew.
    #[arg(long, default_value = "ingress-status-guard-tls")]
    pub(crate) secret: String,
    /// The MutatingWebhookConfiguration whose webhooks get the CA as caBundle.
    #[arg(long, default_value = "ingress-status-guard")]
    pub(crate) webhook_configuration: String,
    /// Renew the certificate when it expires within this many days.
    #[arg(long, default_value_t = 30)]
    pub(crate) renew_before_days: u32,
    /// Validity of a new CA and serving certificate, in days.
    #[arg(long, default_value_t = DEFAULT_VALIDITY_DAYS, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) validity_days: u32,
    /// How long to wait for the MutatingWebhookConfiguration to exist (kubectl apply creates it
    /// after the Job), in seconds.
    #[arg(long, default_value = "120", value_parser = Seconds::ANY)]
    pub(crate) wait_seconds: Duration,
    #[command(flatten)]
    pub(crate) client: ClientArgs,
}

pub(crate) async fn run(args: CertsArgs) -> Result<(), CertError> {
    match args.command {
        CertsCommand::Generate(args) => {
            let GenerateArgs { service, namespace, out, validity_days, force, print_ca_bundle } = args;
            let bundle = certs::generate_files(&certs::Files { service, namespace, out, validity_days, force })?;
            if print_ca_bundle {
                println!("{}", certs::ca_bundle(&bundle.ca_pem));
            }
            Ok(())
        }
        CertsCommand::Bootstrap(args) => {
            let client = crate::client::connect(&args.client.target()).await?;
            let settings = bootstrap::Settings {
                service: args.service,
                namespace: args.namespace,
                secret: args.secret,
                webhook_configuration: args.webhook_configuration,
                renew_before_days: args.renew_before_days,
                validity_days: args.validity_days,
                wait: args.wait_seconds,
            };
            bootstrap::run(client, &settings).await
        }
    }
}
