//! Hand-written SVG chart of a [`Report`]: for each chosen metric a panel of
//! grouped bars, one group per condition, one bar (one colour) per encoder,
//! the value written above each bar, axis labels and a legend.
//!
//! Every bar is a `<rect class="bar" data-encoder=".." data-condition=".."
//! data-metric="..">` so tools and tests can find them. All text is
//! XML-escaped and characters XML 1.0 forbids are dropped, so any report
//! renders to well-formed XML.

use std::fmt::Write as _;

use super::metrics::Metric;
use super::report::Report;

/// Colour-blind-safe palette (Okabe–Ito), cycled per encoder.
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];

const BAR_W: f64 = 22.0;
const BAR_GAP: f64 = 3.0;
const GROUP_PAD: f64 = 14.0;
const PLOT_H: f64 = 240.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 24.0;
const CHAR_W: f64 = 6.5;
/// Vertical room kept above the tallest bar for its rotated value label.
const LABEL_ROOM: f64 = 36.0;

/// Renders the report as an SVG document with one panel per metric (an
/// empty `metrics` draws nDCG@10 alone).
pub fn render_svg(report: &Report, metrics: &[Metric]) -> String {
    let metrics: Vec<Metric> = if metrics.is_empty() {
        vec![Metric::NdcgAt10]
    } else {
        metrics.to_vec()
    };
    let conditions = report.condition_names();
    let n_enc = report.encoders.len().max(1);
    let group_w = n_enc as f64 * (BAR_W + BAR_GAP) - BAR_GAP + 2.0 * GROUP_PAD;
    let plot_w = (conditions.len().max(1) as f64 * group_w).max(240.0);

    // Rotated condition labels (−40°) need vertical room.
    let longest = conditions
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0)
        .min(40) as f64;
    let label_h = longest * CHAR_W * 0.65 + 24.0;

    // Legend: entries laid out left to right, wrapped to the chart width.
    let width = LEFT + plot_w + RIGHT;
    let names: Vec<String> = report.encoders.iter().map(|e| e.display_name()).collect();
    let mut legend = Vec::new(); // (x, row, index)
    let (mut x, mut row) = (LEFT, 0usize);
    for (i, name) in names.iter().enumerate() {
        let w = 20.0 + name.chars().count().min(60) as f64 * CHAR_W + 18.0;
        if x + w > width - RIGHT && x > LEFT {
            x = LEFT;
            row += 1;
        }
        legend.push((x, row, i));
        x += w;
    }
    let legend_rows = if names.is_empty() { 0 } else { row + 1 };
    let top = 40.0 + legend_rows as f64 * 18.0 + 16.0;
    let panel_h = 26.0 + PLOT_H + label_h;
    let height = top + metrics.len() as f64 * panel_h + 10.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" font-family="sans-serif" font-size="11">"#,
        w = width,
        h = height
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="white"/>"#
    );
    let title = format!(
        "{} by query condition: {}",
        metrics
            .iter()
            .map(|m| m.label())
            .collect::<Vec<_>>()
            .join(", "),
        report.dataset
    );
    let _ = writeln!(
        s,
        r#"<text x="{x:.1}" y="24" font-size="15" font-weight="bold">{t}</text>"#,
        x = LEFT,
        t = xml_escape(&title)
    );
    for (x, row, i) in &legend {
        let y = 40.0 + *row as f64 * 18.0;
        let _ = writeln!(
            s,
            r#"<g class="legend-entry"><rect x="{x:.1}" y="{ry:.1}" width="12" height="12" fill="{c}"/><text x="{tx:.1}" y="{ty:.1}">{n}</text></g>"#,
            ry = y - 10.0,
            c = PALETTE[i % PALETTE.len()],
            tx = x + 17.0,
            ty = y,
            n = xml_escape(&names[*i])
        );
    }

    for (p, metric) in metrics.iter().enumerate() {
        let py = top + p as f64 * panel_h + 26.0; // top of the plot area
        let values = report
            .encoders
            .iter()
            .flat_map(|e| e.conditions.iter().map(move |c| c.metrics.get(*metric)))
            .filter(|v| v.is_finite());
        let vmax = values.fold(0.0f64, f64::max);
        // Headroom for the value labels written above the bars.
        let ymax = nice_max(vmax / (1.0 - LABEL_ROOM / PLOT_H));
        let y_of = |v: f64| py + PLOT_H - (v.clamp(0.0, ymax) / ymax) * PLOT_H;

        let _ = writeln!(s, r#"<g class="panel" data-metric="{}">"#, metric.key());
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{y:.1}" font-size="13" font-weight="bold">{t}</text>"#,
            x = LEFT,
            y = py - 10.0,
            t = xml_escape(metric.label())
        );
        // Grid lines and y ticks.
        let steps = tick_steps(ymax);
        for t in 0..=steps {
            let v = ymax * t as f64 / steps as f64;
            let y = y_of(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x1:.1}" y1="{y:.1}" x2="{x2:.1}" y2="{y:.1}" stroke="#dddddd"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="end">{v:.2}</text>"##,
                x1 = LEFT,
                x2 = LEFT + plot_w,
                tx = LEFT - 6.0,
                ty = y + 4.0,
            );
        }
        // Axes.
        let _ = writeln!(
            s,
            r##"<line x1="{l:.1}" y1="{py:.1}" x2="{l:.1}" y2="{b:.1}" stroke="#333333"/><line x1="{l:.1}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}" stroke="#333333"/>"##,
            l = LEFT,
            b = py + PLOT_H,
            r = LEFT + plot_w
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate({x:.1},{y:.1}) rotate(-90)" text-anchor="middle">{t}</text>"#,
            x = 18.0,
            y = py + PLOT_H / 2.0,
            t = xml_escape(metric.label())
        );
        for (ci, cond) in conditions.iter().enumerate() {
            let gx = LEFT + ci as f64 * group_w + GROUP_PAD;
            for (ei, enc) in report.encoders.iter().enumerate() {
                let Some(row) = enc.get(cond) else { continue };
                let v = row.metrics.get(*metric);
                let finite = v.is_finite();
                let bx = gx + ei as f64 * (BAR_W + BAR_GAP);
                let by = if finite { y_of(v) } else { py + PLOT_H };
                let bh = (py + PLOT_H - by).max(0.0);
                let label = if finite {
                    format!("{v:.3}")
                } else {
                    "n/a".to_string()
                };
                let _ = writeln!(
                    s,
                    r#"<rect class="bar" data-encoder="{e}" data-condition="{c}" data-metric="{m}" x="{bx:.1}" y="{by:.1}" width="{BAR_W:.1}" height="{bh:.1}" fill="{f}"><title>{e} / {c}: {label}</title></rect>"#,
                    e = xml_escape(&enc.display_name()),
                    c = xml_escape(cond),
                    m = metric.key(),
                    f = PALETTE[ei % PALETTE.len()],
                );
                let _ = writeln!(
                    s,
                    r#"<text class="value" transform="translate({x:.1},{y:.1}) rotate(-90)" font-size="9">{label}</text>"#,
                    x = bx + BAR_W / 2.0 + 3.0,
                    y = by - 3.0,
                );
            }
            let cx = LEFT + ci as f64 * group_w + group_w / 2.0;
            let shown: String = if cond.chars().count() > 40 {
                cond.chars().take(39).chain(std::iter::once('…')).collect()
            } else {
                cond.clone()
            };
            let _ = writeln!(
                s,
                r#"<text class="condition" transform="translate({cx:.1},{y:.1}) rotate(-40)" text-anchor="end">{t}</text>"#,
                y = py + PLOT_H + 14.0,
                t = xml_escape(&shown)
            );
        }
        let _ = writeln!(
            s,
            r##"<text x="{x:.1}" y="{y:.1}" text-anchor="middle" fill="#555555">query condition</text>"##,
            x = LEFT + plot_w / 2.0,
            y = py + PLOT_H + label_h + 2.0
        );
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    s
}

/// Smallest multiple of 0.1 that is ≥ `v` (at least 0.1).
fn nice_max(v: f64) -> f64 {
    if !v.is_finite() || v <= 0.0 {
        return 0.1;
    }
    ((v * 10.0 - 1e-9).ceil() / 10.0).max(0.1)
}

/// Number of grid intervals: one per 0.1 up to 10, else 5.
fn tick_steps(ymax: f64) -> usize {
    let tenths = (ymax * 10.0).round();
    if (1.0..=10.0).contains(&tenths) {
        tenths as usize
    } else {
        5
    }
}

/// Escapes text for XML content and attribute values; drops characters
/// XML 1.0 does not allow.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if (c as u32) < 0x20 => {}
            '\u{FFFE}' | '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::report::tests::sample_report;

    /// Minimal well-formedness check: one root, balanced and properly
    /// nested tags, quoted attributes, only known entities, no stray `<`/`&`.
    fn check_well_formed(xml: &str) -> Result<usize, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut roots = 0;
        let mut elements = 0;
        let mut rest = xml;
        let check_text = |t: &str| -> Result<(), String> {
            let mut s = t;
            while let Some(i) = s.find('&') {
                let tail = &s[i..];
                let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| tail.starts_with(e));
                if !ok {
                    return Err(format!("bad entity at {:?}", &tail[..tail.len().min(10)]));
                }
                s = &tail[1..];
            }
            Ok(())
        };
        while let Some(lt) = rest.find('<') {
            let text = &rest[..lt];
            if stack.is_empty() && !text.trim().is_empty() {
                return Err(format!("text outside root: {text:?}"));
            }
            check_text(text)?;
            let after = &rest[lt..];
            if let Some(body) = after.strip_prefix("<?") {
                let end = body.find("?>").ok_or("unclosed PI")?;
                rest = &body[end + 2..];
                continue;
            }
            // Find the tag end, skipping quoted attribute values.
            let mut in_quote: Option<char> = None;
            let mut end = None;
            for (i, c) in after.char_indices().skip(1) {
                match (in_quote, c) {
                    (Some(q), c) if c == q => in_quote = None,
                    (Some(_), '<') => return Err("< inside attribute".into()),
                    (Some(_), _) => {}
                    (None, '"') | (None, '\'') => in_quote = Some(c),
                    (None, '<') => return Err("< inside tag".into()),
                    (None, '>') => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let end = end.ok_or("unclosed tag")?;
            let tag = &after[1..end];
            rest = &after[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or("close without open")?;
                if open != name.trim() {
                    return Err(format!("</{name}> closes <{open}>"));
                }
                continue;
            }
            let self_closing = tag.ends_with('/');
            let tag = tag.trim_end_matches('/');
            let name: String = tag.chars().take_while(|c| !c.is_whitespace()).collect();
            if name.is_empty() {
                return Err("empty tag name".into());
            }
            // Attributes: name="value" pairs.
            let mut attrs = tag[name.len()..].trim();
            while !attrs.is_empty() {
                let eq = attrs
                    .find('=')
                    .ok_or(format!("attribute without value in <{name}>"))?;
                let q = attrs[eq + 1..].chars().next().ok_or("no quote")?;
                if q != '"' && q != '\'' {
                    return Err(format!("unquoted attribute in <{name}>"));
                }
                let val_start = eq + 2;
                let close = attrs[val_start..].find(q).ok_or("unclosed attribute")?;
                check_text(&attrs[val_start..val_start + close])?;
                attrs = attrs[val_start + close + 1..].trim_start();
            }
            elements += 1;
            if stack.is_empty() {
                roots += 1;
            }
            if !self_closing {
                stack.push(name);
            }
        }
        if !rest.trim().is_empty() {
            return Err("trailing text".into());
        }
        if !stack.is_empty() {
            return Err(format!("unclosed: {stack:?}"));
        }
        if roots != 1 {
            return Err(format!("{roots} root elements"));
        }
        Ok(elements)
    }

    #[test]
    fn checker_rejects_broken_xml() {
        assert!(check_well_formed("<a><b></a></b>").is_err());
        assert!(check_well_formed("<a>x & y</a>").is_err());
        assert!(check_well_formed("<a x=1/>").is_err());
        assert!(check_well_formed("<a/><b/>").is_err());
        assert!(check_well_formed("<a x=\"<\"/>").is_err());
        assert!(check_well_formed("<?xml version=\"1.0\"?><a x=\"&amp;\">t</a>").is_ok());
    }

    #[test]
    fn svg_is_well_formed_with_one_bar_per_encoder_and_condition() {
        let mut report = sample_report();
        report.dataset = "dl19 <sample> & \"co\" \u{1}".into();
        for metrics in [
            vec![Metric::NdcgAt10],
            vec![Metric::NdcgAt10, Metric::MrrAt10],
        ] {
            let svg = render_svg(&report, &metrics);
            check_well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
            let expected: usize = report.encoders.iter().map(|e| e.conditions.len()).sum();
            assert_eq!(
                svg.matches(r#"class="bar""#).count(),
                expected * metrics.len()
            );
            for e in &report.encoders {
                for c in &e.conditions {
                    for m in &metrics {
                        let needle = format!(
                            r#"data-encoder="{}" data-condition="{}" data-metric="{}""#,
                            xml_escape(&e.display_name()),
                            xml_escape(&c.condition),
                            m.key()
                        );
                        assert_eq!(svg.matches(&needle).count(), 1, "{needle}");
                    }
                }
            }
            assert!(svg.contains("cd | &lt;&amp;&gt;"));
            assert!(svg.contains(">0.448<"));
            assert_eq!(svg.matches(r#"class="legend-entry""#).count(), 2);
            assert!(!svg.contains('\u{1}'));
        }
    }

    #[test]
    fn svg_handles_empty_and_odd_values() {
        let empty = crate::eval::report::Report::new("none");
        check_well_formed(&render_svg(&empty, &[])).unwrap();
        let mut report = sample_report();
        report.encoders[0].conditions[1].metrics.ndcg_at_10 = f64::NAN;
        report.encoders[0].conditions[2].metrics.ndcg_at_10 = 3.0;
        let svg = render_svg(&report, &[Metric::NdcgAt10]);
        check_well_formed(&svg).unwrap();
        assert!(!svg.contains("NaN"));
        assert!(svg.contains("n/a"));
        assert_eq!(nice_max(0.43), 0.5);
        assert_eq!(nice_max(0.0), 0.1);
        assert_eq!(nice_max(2.2), 2.2);
        assert_eq!(nice_max(0.7000001), 0.8);
        assert_eq!(tick_steps(0.8), 8);
        assert_eq!(tick_steps(2.3), 5);
    }
}
