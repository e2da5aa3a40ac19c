//! The report's chart, `benchmarks.png`: lock cycles per second against
//! clients on their own keys, one line per system (left), and per
//! workload one bar per system for the acquire latency p50 (right).

use std::path::Path;

use plotters::prelude::*;

use crate::drive::System;
use crate::Workload;

/// The font the chart is drawn with (Debian's `fonts-dejavu-core`, which
/// the script installs).
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Each system's colour, the same in every chart.
fn color(system: System) -> RGBColor {
    match system {
        System::Lockd => RGBColor(31, 119, 180),
        System::LockdHttp => RGBColor(148, 103, 189),
        System::Etcd => RGBColor(255, 127, 14),
        System::Zookeeper => RGBColor(44, 160, 44),
    }
}

/// Draw `out/benchmarks.png` again from `out/benchmarks.json` (after a
/// change to the chart, without running the systems again).
pub fn redraw(out: &Path) {
    let text = std::fs::read_to_string(out.join("benchmarks.json")).expect("read benchmarks.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("benchmarks.json is JSON");
    let systems: Vec<System> = json["systems"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| System::parse(s.as_str()?))
        .collect();
    let results: Vec<Workload> =
        serde_json::from_value(json["workloads"].clone()).expect("the workloads");
    if let Err(e) = draw(&out.join("benchmarks.png"), &systems, &results) {
        eprintln!("chart not drawn: {e}");
    }
}

/// A workload's name on the chart: short enough for its group.
fn short(w: &Workload) -> String {
    if w.contended {
        format!("{} on one key", w.clients)
    } else if w.clients == 1 {
        "1 client".into()
    } else {
        format!("{} own keys", w.clients)
    }
}

/// Draw the chart of `results` for `systems` into `path`.
pub fn draw(
    path: &Path,
    systems: &[System],
    results: &[Workload],
) -> Result<(), Box<dyn std::error::Error>> {
    let font: &'static [u8] = Box::leak(std::fs::read(FONT)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, font)
        .map_err(|_| "cannot register the font")?;
    let root = BitMapBackend::new(path, (1400, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(700);
    let names: Vec<String> = results.iter().map(short).collect();
    let values = |f: fn(&crate::Measured) -> f64| -> Vec<Vec<f64>> {
        results
            .iter()
            .map(|w| {
                systems
                    .iter()
                    .map(|s| w.get(*s).map_or(f64::NAN, f))
                    .collect()
            })
            .collect()
    };
    lines(&left, systems, results)?;
    bars(
        &right,
        "acquire latency p50, ms, log scale (lower is better)",
        &names,
        systems,
        &values(|m| m.p50_ms),
        2,
    )?;
    root.present()?;
    Ok(())
}

/// The left panel: cycles/s against clients on their own keys (log scale),
/// one line per system.
fn lines(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    systems: &[System],
    results: &[Workload],
) -> Result<(), Box<dyn std::error::Error>> {
    let own: Vec<&Workload> = results.iter().filter(|w| !w.contended).collect();
    let max_clients = own.iter().map(|w| w.clients).max().unwrap_or(1) as f64;
    let max = own
        .iter()
        .flat_map(|w| systems.iter().filter_map(|s| w.get(*s)))
        .map(|m| m.cycles_per_sec)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(1e-9);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "lock cycles per second, own keys (higher is better)",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d((0.7..max_clients * 1.5).log_scale(), 0.0..max * 1.12)?;
    chart
        .configure_mesh()
        .x_desc("clients")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 15))
        .draw()?;
    for system in systems {
        let color = color(*system);
        let points: Vec<(f64, f64)> = own
            .iter()
            .filter_map(|w| {
                let v = w.get(*system)?.cycles_per_sec;
                v.is_finite().then_some((w.clients as f64, v))
            })
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(3)))?
            .label(system.display())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
        chart.draw_series(points.iter().map(|(x, y)| {
            Text::new(
                format!("{y:.0}"),
                (*x * 1.06, *y + max * 0.015),
                ("sans-serif", 12),
            )
        }))?;
    }
    legend(&mut chart)
}

/// The right panel: a group of bars per workload (`values[workload][system]`),
/// each labelled with `decimals` decimals.
fn bars(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    title: &str,
    names: &[String],
    systems: &[System],
    values: &[Vec<f64>],
    decimals: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let n = names.len() as f64;
    let max = values
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(1e-9);
    // A log scale: one client's fraction of a millisecond and a thousand
    // clients' hundreds stay readable on one panel.
    let min = values
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold(max, f64::min);
    let floor = min / 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n, (floor..max * 2.5).log_scale())?;
    // Labels fall on the half steps (0, 0.5, 1, …): name the group centres.
    let label_of = |x: &f64| {
        if (x.fract() - 0.5).abs() < 1e-6 {
            names.get(x.floor() as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len() * 2 + 1)
        .x_label_formatter(&label_of)
        .label_style(("sans-serif", 15))
        .draw()?;
    // The group takes 0.8 of its slot, split evenly between the systems.
    let width = 0.8 / systems.len().max(1) as f64;
    // Fewer digits on narrower bars, so that the labels stay apart.
    let size = if systems.len() > 2 { 12 } else { 14 };
    for (k, system) in systems.iter().enumerate() {
        let color = color(*system);
        let offset = 0.1 + k as f64 * width;
        let bar = |i: usize| values[i].get(k).copied().filter(|v| v.is_finite());
        chart
            .draw_series((0..values.len()).filter_map(|i| {
                let y = bar(i)?;
                let x0 = i as f64 + offset + width * 0.05;
                Some(Rectangle::new(
                    [(x0, floor), (x0 + width * 0.9, y)],
                    color.filled(),
                ))
            }))?
            .label(system.display())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        chart.draw_series((0..values.len()).filter_map(|i| {
            let y = bar(i)?;
            Some(Text::new(
                format!("{y:.decimals$}"),
                (i as f64 + offset, y * 1.25),
                ("sans-serif", size),
            ))
        }))?;
    }
    legend(&mut chart)
}

/// The systems' legend, upper left: over the fewest clients' points and
/// the 1-client group, the lowest of each panel.
fn legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, CT>,
) -> Result<(), Box<dyn std::error::Error>> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}
