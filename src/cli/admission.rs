//! `admission-policy remove`: deletes one guard's admission policies and bindings, and nobody
//! else's (they enforce without the guard, so deleting its Deployment leaves them).

use clap::{Args, Subcommand};

use super::{CliError, client::ClientArgs};
use crate::admission_policy::{DEFAULT_LEASE, desired::Owner, keeper};

#[derive(Args, Debug)]
pub(crate) struct AdmissionPolicyArgs {
    #[command(subcommand)]
    pub command: AdmissionPolicyCommand,
}

#[derive(Subcommand, Debug)]
pub(crate) enum AdmissionPolicyCommand {
    /// Delete every admission policy and binding labelled as this guard's
    /// (`ingress-status-guard/lease=<namespace>.<lease>`), under the listed uid and
    /// resourceVersion, and nothing else. Stop the guard first, or its leader writes them again.
    Remove(RemoveArgs),
}

#[derive(Args, Debug)]
pub(crate) struct RemoveArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Namespace of the guard's leader Lease (the release namespace): required, so that no
    /// default ever picks another guard's objects.
    #[arg(long, env = "ISG_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: String,
    /// Name of the guard's leader Lease (the chart's release fullname).
    #[arg(long, env = "ISG_LEADER_ELECTION_LEASE_NAME", default_value = DEFAULT_LEASE)]
    pub leader_election_lease_name: String,
}

/// Runs `admission-policy remove`: prints how many objects it deleted.
pub(crate) async fn run(args: AdmissionPolicyArgs) -> Result<(), CliError> {
    let AdmissionPolicyCommand::Remove(args) = args.command;
    let owner = Owner::new(&args.leader_election_namespace, &args.leader_election_lease_name);
    let client = crate::client::connect(&args.client.target()).await.map_err(|source| CliError::Client {
        needed_for: "and delete the guard's admission policies".to_owned(),
        source,
    })?;
    let deleted = keeper::remove(&client, &owner).await?;
    println!("deleted {deleted} admission policies and bindings labelled ingress-status-guard/lease={}", owner.label);
    Ok(())
}
