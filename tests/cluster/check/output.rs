//! The one output flag: `check` and `explain` print the same report as a table (`text` is the
//! same), JSON or YAML; `resolve` and `render-admission-policy` as their documents in another
//! format; and each command refuses another value naming the ones it accepts.

use serde_json::{Value, json};

use super::run;
use crate::support::{Class, TestEnv, create_ingress, write_status};

#[tokio::test]
async fn every_command_takes_one_output_flag() {
    let t = TestEnv::new("output").await;
    let class = format!("cls-{}", t.ns);
    create_ingress(&t.ingresses, "web", Class::Field(&class)).await;
    write_status(&t.ingresses, "web", &["198.51.100.1"], false).await.expect("a stale status");
    let kubeconfig = format!("--kubeconfig={}", t.cluster.admin_kubeconfig().display());
    let policy = ["--publish-status-address=203.0.113.10".to_owned(), format!("--ingress-class={class}")];
    let namespace = ["-n", &t.ns];
    let check = [&["check", &kubeconfig, &policy[0], &policy[1]][..], &namespace[..]].concat();

    let table = run(&check);
    assert_eq!(table.code, Some(1), "drift: {}", table.stderr);
    let text = run(&[&check[..], &["-o", "text"]].concat());
    assert_eq!((text.code, &text.stdout), (Some(1), &table.stdout), "text is the table");
    let json = run(&[&check[..], &["-o", "json"]].concat());
    let yaml = run(&[&check[..], &["-o", "yaml"]].concat());
    assert_eq!((json.code, yaml.code), (Some(1), Some(1)), "the exit code is the report's, whatever its format");
    let json: Value = serde_json::from_str(&json.stdout).expect("-o json is one JSON document");
    let yaml: Value = serde_norway::from_str(&yaml.stdout).expect("-o yaml is one YAML document");
    assert_eq!(yaml, json);
    assert_eq!(json["summary"]["drift"], 1, "{json}");

    let object = format!("{}/web", t.ns);
    let explain = ["explain", &object, &kubeconfig, &policy[0], &policy[1]];
    let text = run(&explain);
    assert_eq!(text.code, Some(1), "drift: {}", text.stderr);
    let json = run(&[&explain[..], &["-o", "json"]].concat());
    assert_eq!(json.code, Some(1), "{}", json.stderr);
    let json: Value = serde_json::from_str(&json.stdout).expect("explain -o json is one JSON document");
    assert_eq!(json["exitCode"], 1);
    let lines = json["lines"].as_array().unwrap();
    assert_eq!(lines.len(), text.stdout.lines().count(), "the same lines: {json}\n{}", text.stdout);
    for (line, shown) in lines.iter().zip(text.stdout.lines()) {
        let (label, value) = (line["label"].as_str().unwrap(), line["value"].as_str().unwrap());
        assert!(shown.starts_with(&format!("{label}:")) && shown.ends_with(value), "{shown:?} vs {line}");
    }
    let yaml = run(&[&explain[..], &["-o", "yaml"]].concat());
    assert_eq!(serde_norway::from_str::<Value>(&yaml.stdout).expect("explain -o yaml"), json);

    // Offline commands: their documents in each format.
    let resolve = ["resolve", "--publish-status-address=203.0.113.10,lb.example.com"];
    let default = run(&resolve);
    let want = json!([{"ip": "203.0.113.10"}, {"hostname": "lb.example.com"}]);
    assert_eq!(serde_json::from_str::<Value>(&default.stdout).expect("JSON by default"), want);
    let yaml = run(&[&resolve[..], &["-o", "yaml"]].concat());
    assert_eq!(serde_norway::from_str::<Value>(&yaml.stdout).expect("resolve -o yaml"), want);
    assert_eq!(run(&[&resolve[..], &["-o", "table"]].concat()).stdout, "ADDRESS\n203.0.113.10\nlb.example.com\n");
    let render = ["render-admission-policy", &policy[0], &policy[1]];
    let yaml = run(&render);
    assert_eq!(yaml.code, Some(0), "{}", yaml.stderr);
    let documents: Vec<Value> = yaml
        .stdout
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_norway::from_str(d).expect("a YAML document"))
        .collect();
    let json = run(&[&render[..], &["-o", "json"]].concat());
    let list: Value = serde_json::from_str(&json.stdout).expect("render -o json is one JSON List");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"], json!(documents));

    // A value a command does not take: refused before anything runs, naming the accepted ones.
    for (command, accepted) in [
        (&check[..], "table, json, yaml"),
        (&explain[..], "table, json, yaml"),
        (&resolve[..], "table, json, yaml"),
        (&render[..], "yaml, json"),
        (&["version", "--client"][..], "table, json, yaml"),
        (&["doctor"][..], "table, json, yaml"),
        (&["cutover", "--config-map=a", "--policy=p", "--rollback"][..], "text, json, yaml"),
    ] {
        let out = run(&[command, &["-o", "xml"]].concat());
        assert_eq!(out.code, Some(2), "{command:?}");
        assert!(
            out.stderr.contains("invalid value 'xml' for '--output <OUTPUT>'")
                && out.stderr.contains(&format!("[possible values: {accepted}]")),
            "{command:?}: {}",
            out.stderr
        );
    }
}
