//! The quality gate of a promotion: the evaluation report of base against new boiled down to
//! clean and noisy nDCG@10, and the decision with one reason per condition.

use std::collections::BTreeMap;
use std::path::Path;

use super::record::{BaseNew, EvalSummary};
use super::spec::Gate;
use crate::eval::report::{ConditionKind, EncoderReport, Report};

/// The gate's metric.
const METRIC: &str = "ndcg@10";

fn ndcg(e: &EncoderReport, condition: &str) -> Option<f64> {
    e.get(condition).map(|c| c.metrics.ndcg_at_10)
}

/// Reads `report.json` in `dir` (written by `capot eval` with the base encoder first and the
/// new one second) and summarises it.
pub fn summarise(dir: &Path) -> Result<EvalSummary, String> {
    let path = dir.join("report.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let report = Report::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    summarise_report(&report, dir)
}

/// Summarises a report whose first encoder is the base and second the new one.
pub fn summarise_report(report: &Report, dir: &Path) -> Result<EvalSummary, String> {
    let [base, new] = report.encoders.as_slice() else {
        return Err(format!(
            "expected 2 encoders (base, new) in the report, found {}",
            report.encoders.len()
        ));
    };
    let clean = |e: &EncoderReport| {
        e.clean()
            .map(|c| c.metrics.ndcg_at_10)
            .ok_or_else(|| format!("encoder {} has no clean row", e.name))
    };
    let (base_clean, new_clean) = (clean(base)?, clean(new)?);
    // The noisy conditions: every variant file and generated noise row (mean rows repeat them).
    let mut conditions = BTreeMap::new();
    for c in &base.conditions {
        if matches!(c.kind, ConditionKind::VariantFile | ConditionKind::Noise) {
            if let Some(n) = ndcg(new, &c.condition) {
                conditions.insert(
                    c.condition.clone(),
                    BaseNew {
                        base: c.metrics.ndcg_at_10,
                        new: n,
                    },
                );
            }
        }
    }
    if conditions.is_empty() {
        return Err("the report has no noisy condition to judge robustness by".into());
    }
    let n = conditions.len() as f64;
    let base_noisy = conditions.values().map(|v| v.base).sum::<f64>() / n;
    let new_noisy = conditions.values().map(|v| v.new).sum::<f64>() / n;
    let rel = |base: f64, new: f64| if base > 0.0 { (new - base) / base } else { 0.0 };
    let gap = base_clean - base_noisy;
    Ok(EvalSummary {
        dataset: report.dataset.clone(),
        metric: METRIC.into(),
        base_clean,
        new_clean,
        base_noisy,
        new_noisy,
        clean_change: rel(base_clean, new_clean),
        noisy_change: rel(base_noisy, new_noisy),
        gap_recovered: (gap.abs() > 1e-12).then(|| (new_noisy - base_noisy) / gap),
        conditions,
        report_dir: dir.to_path_buf(),
    })
}

fn pct(x: f64) -> String {
    format!("{:+.2}%", x * 100.0)
}

/// Whether the new encoder passes `gate`, with one line per condition.
pub fn decide(s: &EvalSummary, gate: &Gate) -> (bool, Vec<String>) {
    let noisy_ok = s.noisy_change >= gate.min_noisy_gain;
    let clean_drop = -s.clean_change;
    let clean_ok = clean_drop <= gate.max_clean_drop;
    let reasons = vec![
        format!(
            "noisy {}: {:.4} → {:.4} ({}), required at least {}: {}",
            s.metric,
            s.base_noisy,
            s.new_noisy,
            pct(s.noisy_change),
            pct(gate.min_noisy_gain),
            if noisy_ok { "passed" } else { "failed" }
        ),
        format!(
            "clean {}: {:.4} → {:.4} ({}), allowed drop at most {}: {}",
            s.metric,
            s.base_clean,
            s.new_clean,
            pct(s.clean_change),
            pct(gate.max_clean_drop).trim_start_matches('+'),
            if clean_ok { "passed" } else { "failed" }
        ),
    ];
    (noisy_ok && clean_ok, reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::metrics::MetricSet;
    use crate::eval::report::ConditionReport;

    fn row(name: &str, kind: ConditionKind, ndcg: f64) -> ConditionReport {
        ConditionReport {
            condition: name.into(),
            kind,
            members: vec![],
            metrics: MetricSet {
                ndcg_at_10: ndcg,
                ..Default::default()
            },
            std_dev: None,
            relative_change: None,
            mean_cosine: None,
            adjusted_cosine: None,
            queries_evaluated: 10,
            queries_excluded: 0,
        }
    }

    fn report(base: [f64; 3], new: [f64; 3]) -> Report {
        let mut r = Report::new("d");
        for (name, v) in [("base", base), ("new", new)] {
            let e = r.encoder_mut(name, "1");
            e.push(row("clean", ConditionKind::Clean, v[0]));
            e.push(row("typo1", ConditionKind::VariantFile, v[1]));
            e.push(row("typo2", ConditionKind::VariantFile, v[2]));
            e.push(row(
                "typo-files mean",
                ConditionKind::Mean,
                (v[1] + v[2]) / 2.0,
            ));
        }
        r
    }

    #[test]
    fn summary_uses_noisy_rows_not_means() {
        let s =
            summarise_report(&report([0.8, 0.6, 0.7], [0.79, 0.7, 0.74]), Path::new("/r")).unwrap();
        assert_eq!(s.conditions.len(), 2);
        assert!((s.base_noisy - 0.65).abs() < 1e-12);
        assert!((s.new_noisy - 0.72).abs() < 1e-12);
        assert!((s.clean_change - (-0.0125)).abs() < 1e-12);
        assert!((s.gap_recovered.unwrap() - 0.07 / 0.15).abs() < 1e-9);
    }

    #[test]
    fn gate_passes_and_fails_on_each_condition() {
        let s = summarise_report(
            &report([0.8, 0.6, 0.7], [0.796, 0.7, 0.74]),
            Path::new("/r"),
        )
        .unwrap();
        let (ok, reasons) = decide(
            &s,
            &Gate {
                min_noisy_gain: 0.02,
                max_clean_drop: 0.01,
            },
        );
        assert!(ok, "{reasons:?}");
        assert_eq!(reasons.len(), 2);
        let (ok, reasons) = decide(
            &s,
            &Gate {
                min_noisy_gain: 0.2,
                max_clean_drop: 0.01,
            },
        );
        assert!(!ok);
        assert!(reasons[0].ends_with("failed"), "{reasons:?}");
        assert!(reasons[1].ends_with("passed"), "{reasons:?}");
        let (ok, reasons) = decide(
            &s,
            &Gate {
                min_noisy_gain: 0.0,
                max_clean_drop: 0.001,
            },
        );
        assert!(!ok);
        assert!(reasons[1].ends_with("failed"), "{reasons:?}");
    }

    #[test]
    fn reports_without_two_encoders_or_noise_are_refused() {
        let mut r = Report::new("d");
        r.encoder_mut("base", "1")
            .push(row("clean", ConditionKind::Clean, 0.5));
        assert!(summarise_report(&r, Path::new("/r")).is_err());
        r.encoder_mut("new", "1")
            .push(row("clean", ConditionKind::Clean, 0.5));
        let e = summarise_report(&r, Path::new("/r")).unwrap_err();
        assert!(e.contains("no noisy condition"), "{e}");
    }
}
