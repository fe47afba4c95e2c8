//! The Kubernetes manifests under packaging/kubernetes/, checked offline
//! against the Kubernetes API's own OpenAPI v3 schema (the files
//! `api__v1_openapi.json` and `apis__apps__v1_openapi.json` of Kubernetes
//! 1.34, shipped in the `k8s.io/client-go` module's test data, which
//! `.ci/run` downloads with `go mod download`): every field known to the
//! API (an unknown one is what `kubectl apply --validate=strict` refuses),
//! of its type, the required ones present; then what the
//! API server checks beyond the schema for a DaemonSet (its selector
//! matches its pod template's labels), and that the config the ConfigMap
//! carries is one cpushield accepts.

#[path = "common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Where the schema files are: `CPUSHIELD_K8S_OPENAPI`, else the Go module
/// cache's `k8s.io/client-go@v0.34.4`.
fn schema_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CPUSHIELD_K8S_OPENAPI") {
        return Some(PathBuf::from(dir));
    }
    let out = std::process::Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .ok()?;
    let cache = String::from_utf8(out.stdout).ok()?;
    let dir = Path::new(cache.trim()).join("k8s.io/client-go@v0.34.4/openapi/openapitest/testdata");
    dir.is_dir().then_some(dir)
}

/// One OpenAPI document: its schemas by name.
struct Spec {
    schemas: Map<String, Value>,
}

impl Spec {
    fn load(path: &Path) -> Spec {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc: Value = serde_json::from_str(&text).unwrap();
        Spec {
            schemas: doc["components"]["schemas"].as_object().unwrap().clone(),
        }
    }

    /// The schema of the object of `apiVersion` and `kind`.
    fn of_kind(&self, api_version: &str, kind: &str) -> Option<&Value> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.schemas.values().find(|s| {
            (s["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten())
            .any(|gvk| gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind)
        })
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema["$ref"].as_str() {
            Some(r) => {
                let name = r.trim_start_matches("#/components/schemas/");
                self.resolve(&self.schemas[name])
            }
            None => schema,
        }
    }

    /// What of `value` at `at` does not fit `schema`, one line each.
    fn check(&self, schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
        let schema = self.resolve(schema);
        for part in schema["allOf"].as_array().into_iter().flatten() {
            self.check(part, value, at, out);
        }
        if let Some(choices) = schema["oneOf"].as_array() {
            let fits = choices.iter().any(|c| {
                let mut found = Vec::new();
                self.check(c, value, at, &mut found);
                found.is_empty()
            });
            if !fits {
                out.push(format!("{at}: {value} fits none of its types"));
            }
        }
        let fits = match schema["type"].as_str() {
            None => true,
            Some("object") => value.is_object(),
            Some("array") => value.is_array(),
            Some("string") => value.is_string(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("number") => value.is_number(),
            Some("boolean") => value.is_boolean(),
            Some(other) => panic!("{at}: a schema type {other} this check does not know"),
        };
        if !fits {
            out.push(format!("{at}: {value} is not of type {}", schema["type"]));
            return;
        }
        if let Some(object) = value.as_object() {
            self.check_object(schema, object, at, out);
        }
        if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
            for (i, item) in array.iter().enumerate() {
                self.check(items, item, &format!("{at}[{i}]"), out);
            }
        }
    }

    fn check_object(
        &self,
        schema: &Value,
        object: &Map<String, Value>,
        at: &str,
        out: &mut Vec<String>,
    ) {
        for name in schema["required"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap();
            if !object.contains_key(name) {
                out.push(format!("{at}: the required field {name} is missing"));
            }
        }
        let properties = schema["properties"].as_object();
        let open = schema["x-kubernetes-preserve-unknown-fields"] == true;
        for (key, v) in object {
            let field = format!("{at}.{key}");
            match (
                properties.and_then(|p| p.get(key)),
                schema.get("additionalProperties"),
            ) {
                (Some(s), _) | (None, Some(s)) => self.check(s, v, &field, out),
                (None, None) if open || properties.is_none() && schema["type"].is_null() => {}
                (None, None) => out.push(format!("{field}: a field the API does not know")),
            }
        }
    }
}

/// The documents of the YAML file `path`, as JSON values.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.split("\n---\n")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.starts_with('#'))
        })
        .map(|d| yaml_serde::from_str(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// What the API server would refuse of `doc`: the schema, a DaemonSet's
/// selector against its pod template's labels.
fn refused(specs: &[Spec], doc: &Value) -> Vec<String> {
    let (api_version, kind) = (doc["apiVersion"].as_str(), doc["kind"].as_str());
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        return vec!["a document without apiVersion and kind".into()];
    };
    let Some((spec, schema)) = specs
        .iter()
        .find_map(|s| Some((s, s.of_kind(api_version, kind)?)))
    else {
        return vec![format!("{api_version} {kind}: no such kind in the API")];
    };
    let mut out = Vec::new();
    spec.check(schema, doc, kind, &mut out);
    if kind == "DaemonSet" {
        let selector = doc["spec"]["selector"]["matchLabels"].as_object();
        let labels = &doc["spec"]["template"]["metadata"]["labels"];
        for (k, v) in selector.into_iter().flatten() {
            if &labels[k] != v {
                out.push(format!(
                    "DaemonSet: the selector's {k}={v} is not a label of its pod template"
                ));
            }
        }
    }
    out
}

fn specs() -> Option<Vec<Spec>> {
    let Some(dir) = schema_dir() else {
        skip::skip(
            "kubernetes-openapi",
            "no Kubernetes OpenAPI schema (set CPUSHIELD_K8S_OPENAPI, or go mod download k8s.io/client-go@v0.34.4)",
        );
        return None;
    };
    let files = ["api__v1_openapi.json", "apis__apps__v1_openapi.json"];
    Some(files.iter().map(|f| Spec::load(&dir.join(f))).collect())
}

fn manifests() -> Vec<(PathBuf, Vec<Value>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/kubernetes");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let docs = documents(&p);
            (p, docs)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn the_manifests_are_what_the_kubernetes_api_accepts() {
    let Some(specs) = specs() else { return };
    let all = manifests();
    let kinds: Vec<&str> = (all.iter().flat_map(|(_, docs)| docs))
        .filter_map(|d| d["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"DaemonSet"), "kinds found: {kinds:?}");
    for (path, docs) in &all {
        for doc in docs {
            let found = refused(&specs, doc);
            assert!(
                found.is_empty(),
                "{}:\n{}",
                path.display(),
                found.join("\n")
            );
        }
    }
}

#[test]
fn the_check_refuses_what_the_api_server_would() {
    let Some(specs) = specs() else { return };
    let (_, docs) = manifests()
        .into_iter()
        .find(|(_, docs)| docs.iter().any(|d| d["kind"] == "DaemonSet"))
        .unwrap();
    let daemonset = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    let mut cases: Vec<(&str, Value)> = Vec::new();
    let mut unknown = daemonset.clone();
    unknown["spec"]["template"]["spec"]["hostPid"] = true.into();
    cases.push(("a field the API does not know", unknown));
    let mut wrong_type = daemonset.clone();
    wrong_type["spec"]["template"]["spec"]["hostPID"] = "yes".into();
    cases.push(("is not of type", wrong_type));
    let mut no_image = daemonset.clone();
    let container = &mut no_image["spec"]["template"]["spec"]["containers"][0];
    container.as_object_mut().unwrap().remove("name");
    cases.push(("required field name", no_image));
    let mut selector = daemonset.clone();
    selector["spec"]["selector"]["matchLabels"]["cpushield.io/pool"] = "other".into();
    cases.push(("not a label of its pod template", selector));
    let mut quantity = daemonset.clone();
    quantity["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] =
        true.into();
    cases.push(("fits none of its types", quantity));
    let mut version = daemonset.clone();
    version["apiVersion"] = "apps/v1beta2".into();
    cases.push(("no such kind in the API", version));
    for (expected, doc) in cases {
        let found = refused(&specs, &doc);
        assert!(
            found.iter().any(|f| f.contains(expected)),
            "expected {expected:?}, found {found:?}"
        );
    }
}

#[test]
fn each_configmaps_config_is_one_cpushield_accepts() {
    let mut configs = 0;
    for (path, docs) in manifests() {
        for doc in docs.iter().filter(|d| d["kind"] == "ConfigMap") {
            let Some(text) = doc["data"]["cpushield.toml"].as_str() else {
                continue;
            };
            let request = cpushield::config::parse(text, &path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!request.cpus.is_empty());
            configs += 1;
        }
    }
    assert!(configs > 0, "no ConfigMap with a cpushield.toml");
}
