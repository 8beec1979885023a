//! The axes: round tick steps on plotters' ranged coordinates.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Round tick values of an axis `[0, max]`: multiples of a step of 1, 2 or
/// 5 times a power of ten, labelled with the step's decimals (`0.6`, not
/// `0.6000000000000001`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ticks {
    pub(super) values: Vec<f64>,
    pub(super) decimals: usize,
}

impl Ticks {
    /// At most about `most` intervals over `[0, max]`.
    pub(super) fn new(max: f64, most: usize) -> Self {
        Self::with_step(max, nice_step(max / most.max(1) as f64))
    }

    /// As [`new`](Self::new), on whole numbers only (counts).
    pub(super) fn integers(max: f64, most: usize) -> Self {
        Self::with_step(max, nice_step(max / most.max(1) as f64).max(1.0))
    }

    fn with_step(max: f64, step: f64) -> Self {
        // A step of 10^-k needs k decimals; at least 1 it needs none.
        let decimals = (-step.log10().floor()).clamp(0.0, 17.0) as usize;
        let count = if max.is_finite() && max > 0.0 {
            (max / step * (1.0 + 1e-9)).floor() as u64
        } else {
            0
        };
        let values = (0..=count.min(1_000)).map(|i| i as f64 * step).collect();
        Self { values, decimals }
    }

    pub(super) fn label(&self, value: f64) -> String {
        format!("{value:.*}", self.decimals)
    }

    /// The axis `[0, max]` with these ticks.
    pub(super) fn axis(&self, max: f64) -> RoundAxis {
        RoundAxis {
            inner: (0f64..max).into(),
            ticks: self.values.clone(),
        }
    }
}

/// A linear `f64` axis whose ticks are given ([`Ticks`]), not chosen by
/// plotters (whose float steps print as `0.6000000000000001`).
pub(super) struct RoundAxis {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for RoundAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold points only: the light mesh lines are not drawn.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// The smallest of 1, 2 or 5 times a power of ten that is at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&step| step >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}
