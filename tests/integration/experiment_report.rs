//! `experiment report`'s charts, from a recorded results.json: bars
//! coloured by verdict (a candidate no different from the reference does
//! not look like a win), every run drawn as a point, and no soft-interrupt
//! heat map when there is only one bench to put in it.

use std::path::Path;

use serde_json::Value;

use crate::common::run;

fn fixture() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/experiment/results.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
}

/// `experiment report` on `results` in a new directory.
fn report(results: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("results.json"),
        serde_json::to_string(results).expect("json"),
    )
    .expect("write");
    let (code, _, err) = run(&["experiment", "report", dir.path().to_str().expect("utf8")]);
    assert_eq!(code, 0, "{err}");
    dir
}

/// The fill colours of the bars in a bar chart, left to right: the
/// rectangles that stand on the x axis (the legend's swatches do not).
fn bar_fills(svg: &str) -> Vec<String> {
    let mut bars: Vec<(i64, i64, String)> = Vec::new();
    for rect in svg.split("<rect ").skip(1) {
        let attr = |name: &str| -> Option<String> {
            let start = rect.find(&format!(" {name}=\""))? + name.len() + 3;
            let end = start + rect[start..].find('"')?;
            Some(rect[start..end].to_string())
        };
        let num = |name: &str| attr(name).and_then(|v| v.parse::<i64>().ok());
        let (Some(x), Some(y), Some(h), Some(fill)) =
            (num("x"), num("y"), num("height"), attr("fill"))
        else {
            continue;
        };
        if fill == "#FFFFFF" {
            continue;
        }
        bars.push((x, y + h, fill));
    }
    // The bars share the lowest bottom edge: the x axis.
    let axis = bars.iter().map(|b| b.1).max().unwrap_or(0);
    let mut on_axis: Vec<(i64, String)> = bars
        .into_iter()
        .filter(|b| b.1 == axis)
        .map(|b| (b.0, b.2))
        .collect();
    on_axis.sort();
    on_axis.into_iter().map(|b| b.1).collect()
}

fn set_verdict(results: &mut Value, config: &str, bench_index: usize, verdict: &str) {
    let bench = results["benches"][bench_index]["name"]
        .as_str()
        .expect("bench")
        .to_string();
    for cell in results["cells"].as_array_mut().expect("cells") {
        if cell["config"] == config && cell["bench"] == bench.as_str() {
            cell["comparison"]["verdict"] = Value::from(verdict);
        }
    }
}

#[test]
fn bars_are_coloured_by_verdict_not_by_their_place() {
    // The fixture: pps is worse on the first bench and no different on the
    // second, in the same place in both charts.
    let results = fixture();
    let dir = report(&results);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect(name);
    let worse = bar_fills(&read("bench-1.svg"));
    let same = bar_fills(&read("bench-2.svg"));
    assert_eq!((worse.len(), same.len()), (2, 2), "{worse:?} {same:?}");
    assert_eq!(worse[0], same[0], "the reference looks the same in both");
    assert_ne!(worse[1], same[1], "worse and no difference look alike");
    assert!(read("bench-2.svg").contains("no difference"));

    // Made better on the second bench: a third colour, unlike "no
    // difference" in the same place.
    let mut better = results.clone();
    set_verdict(&mut better, "pps", 1, "better");
    let dir = report(&better);
    let fills = bar_fills(&std::fs::read_to_string(dir.path().join("bench-2.svg")).expect("svg"));
    assert_ne!(fills[1], same[1], "better and no difference look alike");
    assert_ne!(fills[1], worse[1], "better and worse look alike");
}

#[test]
fn every_run_is_a_point_on_its_bar() {
    let results = fixture();
    let dir = report(&results);
    for (i, bench) in results["benches"]
        .as_array()
        .expect("benches")
        .iter()
        .enumerate()
    {
        let runs = results["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .filter(|r| r["bench"] == bench["name"])
            .count();
        assert!(runs > 0);
        let svg =
            std::fs::read_to_string(dir.path().join(format!("bench-{}.svg", i + 1))).expect("svg");
        // One dot per run, and one in the legend.
        assert_eq!(svg.matches("<circle").count(), runs + 1, "bench {}", i + 1);
    }
}

#[test]
fn one_bench_draws_no_soft_interrupt_heat_map() {
    let mut results = fixture();
    let first = results["benches"][0]["name"].clone();
    results["benches"]
        .as_array_mut()
        .expect("benches")
        .truncate(1);
    for key in ["cells", "runs"] {
        results[key]
            .as_array_mut()
            .expect(key)
            .retain(|v| v["bench"] == first);
    }
    let dir = report(&results);
    let files: Vec<String> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.iter().any(|f| f == "bench-1.svg"), "{files:?}");
    assert!(!files.iter().any(|f| f.starts_with("soft-")), "{files:?}");
    let page = std::fs::read_to_string(dir.path().join("report.html")).expect("html");
    assert!(
        !page.contains("%soft per CPU"),
        "an empty heat map is drawn"
    );
    // The per-CPU table still says where the soft-interrupt time went.
    assert!(page.contains("<th>%soft</th>"));

    // Two benches: the heat maps are there.
    let dir = report(&fixture());
    assert!(dir.path().join("soft-1.svg").is_file());
}
