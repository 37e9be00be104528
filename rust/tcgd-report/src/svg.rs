//! What every inline SVG chart of our reports shares: the plot frame and a log10 axis
//! (errors span many decades, so every chart of them is logarithmic).

use std::fmt::Write;

use crate::html::escape;

/// A chart's size and the margins around its plot area.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

impl Frame {
    pub fn plot_width(&self) -> f64 {
        self.width - self.left - self.right
    }

    pub fn plot_height(&self) -> f64 {
        self.height - self.top - self.bottom
    }

    /// The y coordinate of a height in [0, 1] above the baseline.
    pub fn y(&self, height: f64) -> f64 {
        self.top + self.plot_height() * (1.0 - height)
    }
}

/// A log10 axis over the positive finite values it was built from, whole decades from
/// one below the smallest (so the smallest stays visibly above zero) to the largest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    /// None when no value is positive and finite: there is nothing to put on the axis.
    pub fn over(values: impl Iterator<Item = f64>) -> Option<LogAxis> {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && *v > 0.0) {
            lo = lo.min(v.log10());
            hi = hi.max(v.log10());
        }
        if !lo.is_finite() {
            return None;
        }
        let (lo, hi) = (lo.floor() - 1.0, hi.ceil());
        Some(LogAxis {
            lo,
            hi: if hi > lo { hi } else { lo + 1.0 },
        })
    }

    /// Height of `v` above the baseline, in [0, 1]: zero, negative and NaN values on the
    /// baseline, infinity at the top, a positive value at least `floor` (a chart that
    /// must tell a tiny error from none raises it a little).
    pub fn height(&self, v: f64, floor: f64) -> f64 {
        if v.is_nan() || v <= 0.0 {
            return 0.0;
        }
        if v.is_infinite() {
            return 1.0;
        }
        ((v.log10() - self.lo) / (self.hi - self.lo)).clamp(floor, 1.0)
    }

    /// The decades to label, at most about `max_ticks` of them.
    pub fn ticks(&self, max_ticks: usize) -> Vec<f64> {
        let span = (self.hi - self.lo) as usize;
        let step = span.div_ceil(max_ticks.max(1)).max(1);
        (0..=span)
            .step_by(step)
            .map(|i| self.lo + i as f64)
            .collect()
    }

    /// Draws the grid line and label of each tick, and the vertical axis label.
    pub fn draw(
        axis: Option<&LogAxis>,
        out: &mut String,
        frame: &Frame,
        max_ticks: usize,
        label: &str,
    ) {
        if let Some(a) = axis {
            for t in a.ticks(max_ticks) {
                let y = frame.y((t - a.lo) / (a.hi - a.lo));
                let _ = write!(
                    out,
                    "<line class=\"grid\" x1=\"{}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\"/>\
                     <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">1e{}</text>",
                    frame.left,
                    frame.width - frame.right,
                    frame.left - 6.0,
                    y + 4.0,
                    t as i64
                );
            }
        }
        let middle = frame.top + frame.plot_height() / 2.0;
        let _ = write!(
            out,
            "<text x=\"14\" y=\"{middle:.1}\" transform=\"rotate(-90 14 {middle:.1})\" \
             text-anchor=\"middle\">{}</text>",
            escape(label)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_spans_whole_decades_with_one_below_the_smallest() {
        let axis = LogAxis::over([2e-7, 0.0, f64::NAN, 3e-3].into_iter()).unwrap();
        assert_eq!(axis, LogAxis { lo: -8.0, hi: -2.0 });
        assert_eq!(
            axis.ticks(6),
            vec![-8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0]
        );
        assert_eq!(axis.ticks(3), vec![-8.0, -6.0, -4.0, -2.0]);
        assert_eq!(axis.height(0.0, 0.02), 0.0);
        assert_eq!(axis.height(f64::INFINITY, 0.0), 1.0);
        assert_eq!(axis.height(1e-9, 0.02), 0.02);
        assert!((axis.height(1e-5, 0.0) - 0.5).abs() < 1e-12);
        assert!(LogAxis::over([0.0, -1.0].into_iter()).is_none());
    }
}
