//! `oxplane validate` as a user runs it: the getting-started example validates as it is;
//! broken copies (an unknown field, a wrong type, a kind nobody defines, a CEL rule broken)
//! give Crossplane's lines and exit status; `render`'s output validates through stdin.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn oxplane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_oxplane"))
}

fn getting_started() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/getting-started").to_str().unwrap().to_string()
}

/// Runs `oxplane <args>` with `stdin`: (success, stdout, stderr).
fn run(args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = oxplane().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_getting_started_example_is_valid() {
    let dir = getting_started();
    let (ok, stdout, stderr) = run(&["validate", &dir, &dir], "");
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout,
        "[✓] pkg.crossplane.io/v1, Kind=Provider, provider-nop validated successfully
[✓] pkg.crossplane.io/v1, Kind=Function, function-patch-and-transform validated successfully
[✓] pkg.crossplane.io/v1, Kind=Function, function-auto-ready validated successfully
[✓] apiextensions.crossplane.io/v2, Kind=CompositeResourceDefinition, apps.example.org validated successfully
[✓] apiextensions.crossplane.io/v1, Kind=Composition, apps validated successfully
[✓] example.org/v1, Kind=App, my-app validated successfully
Total 6 resources: 0 missing schemas, 6 success cases, 0 failure cases
"
    );
    // --skip-success-results leaves the total.
    let (ok, stdout, _) = run(&["resource", "validate", &dir, &dir, "--skip-success-results"], "");
    assert!(ok);
    assert_eq!(stdout, "Total 6 resources: 0 missing schemas, 6 success cases, 0 failure cases\n");
}

#[test]
fn broken_copies_give_crossplanes_lines_and_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let example = |file: &str| std::fs::read_to_string(Path::new(&getting_started()).join(file)).unwrap();
    let xrd = dir.path().join("xrd.yaml");
    // The XRD with a CEL rule on the size.
    let with_rule = example("02-xrd.yaml").replace(
        "                description: small, medium or large.\n",
        "                description: small, medium or large.\n                x-kubernetes-validations:\n                - rule: self in ['small', 'medium', 'large']\n                  message: size must be small, medium or large\n",
    );
    assert_ne!(with_rule, example("02-xrd.yaml"));
    std::fs::write(&xrd, with_rule).unwrap();
    let app = example("04-app.yaml");
    let apps = [
        app.replace("name: my-app", "name: unknown-field").replace("size: medium", "size: medium\n  colour: blue"),
        app.replace("name: my-app", "name: wrong-type").replace("size: medium", "size: 3"),
        app.replace("name: my-app", "name: huge").replace("size: medium", "size: huge"),
        app.replace("name: my-app", "name: version-two").replace("example.org/v1", "example.org/v2"),
        app.clone(),
    ];
    let resources = dir.path().join("apps.yaml");
    std::fs::write(&resources, apps.join("---\n")).unwrap();

    let (ok, stdout, stderr) = run(&["validate", xrd.to_str().unwrap(), resources.to_str().unwrap()], "");
    assert!(!ok, "failures make the command fail");
    assert!(stderr.contains("cannot validate resources: could not validate all resources"), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            r#"[x] schema validation error example.org/v1, Kind=App, unknown-field : spec.colour: Invalid value: "colour": unknown field: "colour""#,
            r#"[x] schema validation error example.org/v1, Kind=App, wrong-type : spec.size: Invalid value: "integer": spec.size in body must be of type string: "integer""#,
            r#"[x] CEL validation error example.org/v1, Kind=App, wrong-type : spec.size: Invalid value: "string": size must be small, medium or large"#,
            r#"[x] CEL validation error example.org/v1, Kind=App, huge : spec.size: Invalid value: "string": size must be small, medium or large"#,
            "[!] could not find CRD/XRD for: example.org/v2, Kind=App",
            "[✓] example.org/v1, Kind=App, my-app validated successfully",
            "Total 5 resources: 1 missing schemas, 1 success cases, 3 failure cases",
        ],
        "{stdout}"
    );

    // Only a missing schema: success, unless --error-on-missing-schemas.
    let only_missing = dir.path().join("v2.yaml");
    std::fs::write(&only_missing, &apps[3]).unwrap();
    let (ok, stdout, _) = run(&["validate", xrd.to_str().unwrap(), only_missing.to_str().unwrap()], "");
    assert!(ok);
    assert_eq!(stdout, "[!] could not find CRD/XRD for: example.org/v2, Kind=App\nTotal 1 resources: 1 missing schemas, 0 success cases, 0 failure cases\n");
    let (ok, _, stderr) = run(&["validate", xrd.to_str().unwrap(), only_missing.to_str().unwrap(), "--error-on-missing-schemas"], "");
    assert!(!ok);
    assert!(stderr.contains("could not validate all resources, schema(s) missing"), "{stderr}");

    let (ok, _, stderr) = run(&["validate", "-", "-"], "");
    assert!(!ok);
    assert!(stderr.contains("cannot use stdin for both extensions and resources"), "{stderr}");
}

#[test]
fn what_render_prints_validates_through_stdin() {
    let dir = getting_started();
    let file = |f: &str| Path::new(&dir).join(f).to_str().unwrap().to_string();
    let out = oxplane().args(["render", &file("04-app.yaml"), &file("03-composition.yaml"), &file("01-functions.yaml"), "-x"]).output().unwrap();
    assert!(out.status.success());
    let (ok, stdout, stderr) = run(&["validate", &dir, "-"], &String::from_utf8_lossy(&out.stdout));
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout,
        "[✓] example.org/v1, Kind=App, my-app validated successfully
[✓] nop.crossplane.io/v1alpha1, Kind=NopResource, cache validated successfully
[✓] nop.crossplane.io/v1alpha1, Kind=NopResource, database validated successfully
Total 3 resources: 0 missing schemas, 3 success cases, 0 failure cases
"
    );
}
