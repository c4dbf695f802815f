//! Throughput-and-latency charts as standalone SVG.
//!
//! The reference reports plot throughput as bars and average latency as a
//! line against concurrency (or against the systems compared). The SVG is
//! written by hand: charting crates need font files to lay out text, which
//! CI machines may not have, while an SVG viewer renders `<text>` itself.

use std::fmt::Write as _;

/// One chart: a bar per category on the left axis, an optional line on the
/// right axis.
#[derive(Clone, Debug)]
pub struct BarLineChart {
    pub title: String,
    pub x_label: String,
    pub categories: Vec<String>,
    pub bar_label: String,
    pub bars: Vec<f64>,
    pub line_label: String,
    pub line: Vec<Option<f64>>,
}

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 90.0;
const TOP: f64 = 70.0;
const BOTTOM: f64 = 110.0;
const TICKS: usize = 5;
const BAR_COLOR: &str = "#4e79a7";
const LINE_COLOR: &str = "#e15759";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round step so that `TICKS` steps cover `max`.
fn nice_step(max: f64) -> f64 {
    if !(max.is_finite() && max > 0.0) {
        return 1.0;
    }
    let raw = max / TICKS as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 2.5 {
        2.5
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Compact axis labels: 12500 -> "12.5k", 0.25 -> "0.25".
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = if scaled == scaled.trunc() {
        format!("{scaled:.0}")
    } else if scaled.abs() >= 10.0 {
        format!("{scaled:.1}")
    } else {
        format!("{scaled:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

impl BarLineChart {
    pub fn to_svg(&self) -> String {
        let n = self.categories.len().max(1);
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let bar_max = self.bars.iter().copied().fold(0.0, f64::max);
        let bar_step = nice_step(bar_max);
        let bar_top = bar_step * TICKS as f64;
        let line_max = self.line.iter().flatten().copied().fold(0.0, f64::max);
        let line_step = nice_step(line_max);
        let line_top = line_step * TICKS as f64;
        let slot = plot_w / n as f64;
        let y_of = |v: f64, top: f64| TOP + plot_h - (v / top).clamp(0.0, 1.0) * plot_h;

        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif" font-size="13">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="32" text-anchor="middle" font-size="18" font-weight="bold">{}</text>"#,
            WIDTH / 2.0,
            escape(&self.title)
        );
        // Grid and both axes' tick labels.
        for i in 0..=TICKS {
            let y = TOP + plot_h - plot_h * i as f64 / TICKS as f64;
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e0e0e0"/>"##,
                LEFT + plot_w
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{BAR_COLOR}">{}</text>"#,
                LEFT - 8.0,
                y + 4.0,
                short_number(bar_step * i as f64)
            );
            if self.line.iter().any(Option::is_some) {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="start" fill="{LINE_COLOR}">{}</text>"#,
                    LEFT + plot_w + 8.0,
                    y + 4.0,
                    short_number(line_step * i as f64)
                );
            }
        }
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#333"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/>"##,
            TOP + plot_h,
            TOP + plot_h,
            LEFT + plot_w,
            TOP + plot_h
        );
        // Bars with their values.
        for (i, (cat, v)) in self.categories.iter().zip(&self.bars).enumerate() {
            let bw = slot * 0.6;
            let x = LEFT + slot * i as f64 + (slot - bw) / 2.0;
            let y = y_of(*v, bar_top);
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{bw:.1}" height="{:.1}" fill="{BAR_COLOR}"><title>{}: {:.0}</title></rect>"#,
                TOP + plot_h - y,
                escape(cat),
                v
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="{BAR_COLOR}">{}</text>"#,
                x + bw / 2.0,
                y - 4.0,
                short_number(*v)
            );
            let cx = LEFT + slot * (i as f64 + 0.5);
            let _ = writeln!(
                s,
                r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                TOP + plot_h + 18.0,
                escape(cat)
            );
        }
        // The latency line over the bars.
        let points: Vec<(f64, f64, f64)> = self
            .line
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (LEFT + slot * (i as f64 + 0.5), y_of(v, line_top), v)))
            .collect();
        if points.len() > 1 {
            let path: Vec<String> = points
                .iter()
                .map(|(x, y, _)| format!("{x:.1},{y:.1}"))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{LINE_COLOR}" stroke-width="2.5"/>"#,
                path.join(" ")
            );
        }
        for (x, y, v) in &points {
            let _ = writeln!(
                s,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="4.5" fill="{LINE_COLOR}"><title>{}</title></circle>"#,
                short_number(*v)
            );
        }
        // Axis titles and legend.
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            HEIGHT - BOTTOM + 48.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(22,{:.1}) rotate(-90)" text-anchor="middle" fill="{BAR_COLOR}">{}</text>"#,
            TOP + plot_h / 2.0,
            escape(&self.bar_label)
        );
        if !points.is_empty() {
            let _ = writeln!(
                s,
                r#"<text transform="translate({:.1},{:.1}) rotate(90)" text-anchor="middle" fill="{LINE_COLOR}">{}</text>"#,
                WIDTH - 22.0,
                TOP + plot_h / 2.0,
                escape(&self.line_label)
            );
        }
        let ly = HEIGHT - 30.0;
        let _ = writeln!(
            s,
            r#"<rect x="{LEFT}" y="{:.1}" width="14" height="14" fill="{BAR_COLOR}"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
            ly - 11.0,
            LEFT + 20.0,
            escape(&self.bar_label)
        );
        if !points.is_empty() {
            let lx = LEFT + 260.0;
            let _ = writeln!(
                s,
                r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{LINE_COLOR}" stroke-width="2.5"/><circle cx="{:.1}" cy="{:.1}" r="4" fill="{LINE_COLOR}"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
                ly - 4.0,
                lx + 24.0,
                ly - 4.0,
                lx + 12.0,
                ly - 4.0,
                lx + 30.0,
                escape(&self.line_label)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_bars_and_line() {
        let c = BarLineChart {
            title: "memtier <1:10>".into(),
            x_label: "connections".into(),
            categories: vec!["400".into(), "800".into()],
            bar_label: "ops/sec".into(),
            bars: vec![120_000.0, 180_000.0],
            line_label: "avg latency (ms)".into(),
            line: vec![Some(1.5), Some(2.25)],
        };
        let svg = c.to_svg();
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<rect x=").count(), 3); // two bars + legend swatch
        assert!(svg.contains("<polyline"));
        assert!(svg.contains("memtier &lt;1:10&gt;"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(nice_step(100.0), 20.0);
        assert_eq!(nice_step(180_000.0), 50_000.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(short_number(12_500.0), "12.5k");
        assert_eq!(short_number(2.0), "2");
        assert_eq!(short_number(0.25), "0.25");
    }
}
