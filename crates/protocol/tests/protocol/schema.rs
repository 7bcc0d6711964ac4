//! The committed `schema/` folder matches the types exactly.
//!
//! `UPDATE_SCHEMA=1 cargo test -p plan-protocol` rewrites it (and removes
//! files that no longer belong); without the variable any drift fails.

use std::collections::BTreeSet;
use std::path::PathBuf;

use plan_protocol::schema::schema_files;

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema")
}

#[test]
fn committed_schema_matches_the_types() {
    let dir = schema_dir();
    let files = schema_files();
    let expected: BTreeSet<String> = files.iter().map(|file| file.file_name.clone()).collect();
    assert_eq!(expected.len(), files.len(), "duplicate schema file names");

    if std::env::var_os("UPDATE_SCHEMA").is_some_and(|value| !value.is_empty() && value != "0") {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".json") && !expected.contains(&name) {
                std::fs::remove_file(&path).unwrap();
            }
        }
        for file in &files {
            std::fs::write(dir.join(&file.file_name), file.render().unwrap()).unwrap();
        }
        return;
    }

    let mut drift = Vec::new();
    for file in &files {
        let committed = std::fs::read_to_string(dir.join(&file.file_name)).unwrap_or_default();
        if committed != file.render().unwrap() {
            drift.push(file.file_name.clone());
        }
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".json"))
                .collect()
        })
        .unwrap_or_default();
    drift.extend(
        present
            .difference(&expected)
            .map(|stale| format!("{stale} (stale)")),
    );
    assert!(
        drift.is_empty(),
        "schema/ drifted from the types: {drift:?}; run `UPDATE_SCHEMA=1 cargo test -p plan-protocol` and review the diff"
    );
}

#[test]
fn every_method_and_notification_has_a_schema() {
    let names: BTreeSet<String> = schema_files().into_iter().map(|file| file.file_name).collect();
    for method in plan_protocol::method::ALL {
        let stem = method.replace('/', ".");
        assert!(names.contains(&format!("{stem}.params.json")), "{method} params");
        assert!(names.contains(&format!("{stem}.result.json")), "{method} result");
    }
    for method in plan_protocol::notification_method::ALL {
        let stem = method.replace('/', ".");
        assert!(names.contains(&format!("{stem}.notification.json")), "{method}");
    }
}

#[test]
fn params_schemas_refuse_unknown_fields_and_results_require_nullable_fields() {
    let files = schema_files();
    let find = |name: &str| {
        files
            .iter()
            .find(|file| file.file_name == name)
            .map(|file| file.schema.clone())
            .unwrap()
    };
    let reject = find("plan.reject.params.json");
    assert_eq!(reject["additionalProperties"], serde_json::json!(false));
    assert_eq!(reject["required"], serde_json::json!(["approvalId"]));

    let approve = find("plan.approve.params.json");
    assert_eq!(approve["required"], serde_json::json!(["approvalId"]));

    let create = find("session.create.params.json");
    assert_eq!(create["required"], serde_json::json!(["workspaceRoot"]));

    let approval = find("plan_approval.json");
    let required = approval["required"].as_array().unwrap();
    for field in [
        "artifact",
        "errorCode",
        "decidedAt",
        "permissionMode",
        "executionId",
        "executionState",
    ] {
        assert!(
            required.contains(&serde_json::json!(field)),
            "{field} must be required (nullable)"
        );
    }
}
