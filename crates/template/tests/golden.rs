//! Golden tests: every `inputs/NAME.eex` (with assigns from `inputs/NAME.json` when present) is
//! rendered, and the output, or the error's kind and full text, is compared with
//! `golden/NAME.txt`. Templates may call the partials in `inputs/partials/`.
//!
//! To accept new output after checking it: `GALLEON_GOLDEN=overwrite cargo test -p
//! galleon-template --test golden`, then review the diff of `tests/golden/`.

use std::fs;
use std::path::Path;

use galleon_template::{Assigns, Engine};

fn run_case(dir: &Path, name: &str, partials: &[(String, String)]) -> String {
    let source = fs::read_to_string(dir.join(format!("{name}.eex"))).unwrap();
    let assigns = match fs::read_to_string(dir.join(format!("{name}.json"))) {
        Ok(json) => Assigns::from_json(serde_json::from_str(&json).unwrap()).unwrap(),
        Err(_) => Assigns::new(),
    };
    let template = format!("{name}.eex");
    let mut sources = vec![(template.clone(), source)];
    sources.extend(partials.iter().cloned());
    let result = Engine::from_sources(sources).and_then(|e| e.render(&template, &assigns));
    match result {
        Ok(out) => String::from_utf8(out.to_vec()).unwrap(),
        Err(e) => format!("error ({:?}): {e}\n", e.kind()),
    }
}

#[test]
fn golden() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let inputs = root.join("inputs");
    let golden = root.join("golden");
    let overwrite = std::env::var("GALLEON_GOLDEN").is_ok_and(|v| v == "overwrite");
    let mut partials = Vec::new();
    for entry in fs::read_dir(inputs.join("partials")).unwrap() {
        let path = entry.unwrap().path();
        let name = format!("partials/{}", path.file_name().unwrap().to_string_lossy());
        partials.push((name, fs::read_to_string(&path).unwrap()));
    }
    let mut names: Vec<String> = fs::read_dir(&inputs)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let n = p.file_name()?.to_str()?.strip_suffix(".eex")?.to_owned();
            p.is_file().then_some(n)
        })
        .collect();
    names.sort();
    assert!(names.len() > 50, "inputs missing: {names:?}");
    let mut failures = Vec::new();
    for name in &names {
        let actual = run_case(&inputs, name, &partials);
        let path = golden.join(format!("{name}.txt"));
        if overwrite {
            fs::write(&path, &actual).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&path).unwrap_or_else(|_| "<missing>".into());
        if actual != expected {
            failures.push(format!(
                "--- {name}\nexpected:\n{expected}\nactual:\n{actual}"
            ));
        }
        // Every case named `err_*` must fail, every other case must not.
        assert_eq!(
            name.starts_with("err_"),
            actual.starts_with("error ("),
            "{name}: {actual}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
