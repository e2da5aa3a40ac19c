//! The report's chart, `benchmarks.png`: per workload, one bar per system
//! for lock cycles per second (left) and acquire latency p50 (right).

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
        System::Etcd => RGBColor(255, 127, 14),
        System::Zookeeper => RGBColor(44, 160, 44),
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
    let names: Vec<String> = results.iter().map(|w| w.name.clone()).collect();
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
    bars(
        &left,
        "lock cycles per second (higher is better)",
        &names,
        systems,
        &values(|m| m.cycles_per_sec),
        0,
    )?;
    bars(
        &right,
        "acquire latency p50, ms (lower is better)",
        &names,
        systems,
        &values(|m| m.p50_ms),
        2,
    )?;
    root.present()?;
    Ok(())
}

/// One panel: a group of bars per workload (`values[workload][system]`),
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
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n, 0.0..max * 1.18)?;
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
                    [(x0, 0.0), (x0 + width * 0.9, y)],
                    color.filled(),
                ))
            }))?
            .label(system.display())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        chart.draw_series((0..values.len()).filter_map(|i| {
            let y = bar(i)?;
            Some(Text::new(
                format!("{y:.decimals$}"),
                (i as f64 + offset + width * 0.05, y + max * 0.03),
                ("sans-serif", size),
            ))
        }))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        // Upper left: over the 1-client group, the lowest bars of both
        // panels.
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}
