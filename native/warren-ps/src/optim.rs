//! Server-side optimizers (pure): each table has one, with its hyper-parameters, and the
//! state it keeps per element (momentum, accumulators) lives in the shard beside the
//! parameters, so a checkpoint of the shard holds it too.
//!
//! The state of `n` elements is `slots() * n` floats, slot by slot (`[m0..mn, v0..vn]` for
//! Adam). Adam's bias correction counts the updates of a sparse row (lazy Adam), or of a
//! dense table's shard (every update that reached that shard).

use std::ops::Range;

use serde::{Deserialize, Serialize};

/// An optimizer and its hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "optimizer", rename_all = "snake_case")]
pub enum Optimizer {
    /// `p -= lr * g`.
    Sgd {
        /// Learning rate.
        lr: f32,
    },
    /// `v = momentum * v + g; p -= lr * v`.
    Momentum {
        /// Learning rate.
        lr: f32,
        /// Decay of the velocity, in `[0, 1)`.
        momentum: f32,
    },
    /// `a += g * g; p -= lr * g / (sqrt(a) + eps)`.
    Adagrad {
        /// Learning rate.
        lr: f32,
        /// Added to the denominator.
        eps: f32,
        /// Starting value of the accumulator `a`.
        initial_accumulator: f32,
    },
    /// Adam with bias correction: `m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    /// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)`.
    Adam {
        /// Learning rate.
        lr: f32,
        /// Decay of the first moment, in `[0, 1)`.
        beta1: f32,
        /// Decay of the second moment, in `[0, 1)`.
        beta2: f32,
        /// Added to the denominator.
        eps: f32,
    },
}

impl Optimizer {
    /// Plain SGD with learning rate `lr`.
    pub fn sgd(lr: f32) -> Optimizer {
        Optimizer::Sgd { lr }
    }

    /// Adam with the usual defaults (`beta1` 0.9, `beta2` 0.999, `eps` 1e-8).
    pub fn adam(lr: f32) -> Optimizer {
        Optimizer::Adam { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8 }
    }

    /// Parses `sgd:LR`, `momentum:LR:M`, `adagrad:LR[:EPS[:A0]]`, `adam:LR[:B1:B2:EPS]`.
    pub fn parse(s: &str) -> Result<Optimizer, String> {
        let mut parts = s.split(':');
        let name = parts.next().unwrap_or_default();
        let nums: Vec<f32> = parts
            .map(|p| p.parse::<f32>().map_err(|_| format!("optimizer {s:?}: {p:?} is not a number")))
            .collect::<Result<_, _>>()?;
        let at = |i: usize, default: Option<f32>| {
            nums.get(i).copied().or(default).ok_or_else(|| format!("optimizer {s:?}: missing parameter {}", i + 1))
        };
        let opt = match name {
            "sgd" => Optimizer::Sgd { lr: at(0, None)? },
            "momentum" => Optimizer::Momentum { lr: at(0, None)?, momentum: at(1, Some(0.9))? },
            "adagrad" => {
                Optimizer::Adagrad { lr: at(0, None)?, eps: at(1, Some(1e-8))?, initial_accumulator: at(2, Some(0.1))? }
            }
            "adam" => Optimizer::Adam {
                lr: at(0, None)?,
                beta1: at(1, Some(0.9))?,
                beta2: at(2, Some(0.999))?,
                eps: at(3, Some(1e-8))?,
            },
            other => return Err(format!("unknown optimizer {other:?}: expected sgd, momentum, adagrad or adam")),
        };
        opt.validate()?;
        Ok(opt)
    }

    /// Checks the hyper-parameters; the error says which one is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let finite = |name: &str, v: f32| if v.is_finite() { Ok(()) } else { Err(format!("{name} {v} is not finite")) };
        let decay = |name: &str, v: f32| {
            if (0.0..1.0).contains(&v) { Ok(()) } else { Err(format!("{name} {v} is not in [0, 1)")) }
        };
        match *self {
            Optimizer::Sgd { lr } => finite("lr", lr),
            Optimizer::Momentum { lr, momentum } => finite("lr", lr).and(decay("momentum", momentum)),
            Optimizer::Adagrad { lr, eps, initial_accumulator } => finite("lr", lr).and(finite("eps", eps)).and(
                if initial_accumulator >= 0.0 && eps >= 0.0 && initial_accumulator + eps > 0.0 {
                    Ok(())
                } else {
                    Err(format!("initial_accumulator {initial_accumulator} + eps {eps} must be > 0"))
                },
            ),
            Optimizer::Adam { lr, beta1, beta2, eps } => finite("lr", lr)
                .and(decay("beta1", beta1))
                .and(decay("beta2", beta2))
                .and(if eps > 0.0 { Ok(()) } else { Err(format!("eps {eps} must be > 0")) }),
        }
    }

    /// Floats of state per element.
    pub fn slots(&self) -> usize {
        match self {
            Optimizer::Sgd { .. } => 0,
            Optimizer::Momentum { .. } | Optimizer::Adagrad { .. } => 1,
            Optimizer::Adam { .. } => 2,
        }
    }

    /// The value every float of a new element's state starts at.
    pub fn state_start(&self) -> f32 {
        match *self {
            Optimizer::Adagrad { initial_accumulator, .. } => initial_accumulator,
            _ => 0.0,
        }
    }

    /// The state of `n` new elements.
    pub fn new_state(&self, n: usize) -> Vec<f32> {
        vec![self.state_start(); self.slots() * n]
    }

    /// Applies gradient `grad` to `params` (same length `n`) and their `state`
    /// (`slots() * n` floats); `t` counts the updates including this one (from 1).
    pub fn apply(&self, params: &mut [f32], state: &mut [f32], t: u64, grad: &[f32]) {
        self.apply_range(params, state, 0..params.len(), t, grad);
    }

    /// [`apply`](Self::apply) to elements `range` of `params` (and their state) only, with
    /// `grad` of `range`'s length: an update applied range by range is the same, bit for bit,
    /// as the update applied at once (every optimizer here works element by element).
    pub fn apply_range(&self, params: &mut [f32], state: &mut [f32], range: Range<usize>, t: u64, grad: &[f32]) {
        let n = params.len();
        debug_assert_eq!(grad.len(), range.len());
        debug_assert_eq!(state.len(), self.slots() * n);
        let params = &mut params[range.clone()];
        match *self {
            Optimizer::Sgd { lr } => {
                for (p, g) in params.iter_mut().zip(grad) {
                    *p -= lr * g;
                }
            }
            Optimizer::Momentum { lr, momentum } => {
                for ((p, v), g) in params.iter_mut().zip(state[range].iter_mut()).zip(grad) {
                    *v = momentum * *v + g;
                    *p -= lr * *v;
                }
            }
            Optimizer::Adagrad { lr, eps, .. } => {
                for ((p, a), g) in params.iter_mut().zip(state[range].iter_mut()).zip(grad) {
                    *a += g * g;
                    *p -= lr * g / (a.sqrt() + eps);
                }
            }
            Optimizer::Adam { lr, beta1, beta2, eps } => {
                let (m, v) = state.split_at_mut(n);
                let (m, v) = (&mut m[range.clone()], &mut v[range]);
                let t = t.min(i32::MAX as u64) as i32;
                let (c1, c2) = (1.0 - beta1.powi(t), 1.0 - beta2.powi(t));
                for (((p, m), v), g) in params.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(grad) {
                    *m = beta1 * *m + (1.0 - beta1) * g;
                    *v = beta2 * *v + (1.0 - beta2) * g * g;
                    *p -= lr * (*m / c1) / ((*v / c2).sqrt() + eps);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `steps` updates of one element from `p0` with gradient `g` each time.
    fn run(opt: Optimizer, p0: f32, grads: &[f32]) -> (f32, Vec<f32>) {
        let mut p = [p0];
        let mut s = opt.new_state(1);
        for (t, g) in grads.iter().enumerate() {
            opt.apply(&mut p, &mut s, t as u64 + 1, &[*g]);
        }
        (p[0], s)
    }

    fn close(a: f32, b: f64) -> bool {
        (a as f64 - b).abs() < 1e-6 * (1.0 + b.abs())
    }

    #[test]
    fn sgd_and_momentum_match_their_formulas_by_hand() {
        let (p, s) = run(Optimizer::sgd(0.5), 1.0, &[0.2, 0.4]);
        assert!(close(p, 1.0 - 0.1 - 0.2) && s.is_empty());
        // v1 = 0.2, p = 1 - 0.05; v2 = 0.9*0.2 + 0.4 = 0.58, p -= 0.145.
        let (p, s) = run(Optimizer::Momentum { lr: 0.25, momentum: 0.9 }, 1.0, &[0.2, 0.4]);
        assert!(close(p, 1.0 - 0.05 - 0.145), "{p}");
        assert!(close(s[0], 0.58));
    }

    #[test]
    fn adagrad_and_adam_match_their_formulas_by_hand() {
        // a = 0.1 + 0.25 = 0.35; p = 1 - 0.1 * 0.5 / sqrt(0.35).
        let (p, s) = run(Optimizer::Adagrad { lr: 0.1, eps: 0.0, initial_accumulator: 0.1 }, 1.0, &[0.5]);
        assert!(close(p, 1.0 - 0.05 / 0.35f64.sqrt()), "{p}");
        assert!(close(s[0], 0.35));
        // Adam's first step moves by lr * g / (|g| + eps): lr in the sign of g.
        let (p, _) = run(Optimizer::adam(0.01), 1.0, &[3.0]);
        assert!(close(p, 0.99), "{p}");
        // Second step with g = -1: m = 0.9*0.3 - 0.1 = 0.17, v = 0.999*0.009 + 0.001 = 0.009991.
        let (p, s) = run(Optimizer::Adam { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 0.0 }, 1.0, &[3.0, -1.0]);
        let (m, v) = (0.17f64, 0.009991f64);
        let step = 0.01 * (m / (1.0 - 0.81)) / (v / (1.0 - 0.998001)).sqrt();
        assert!(close(p, 0.99 - step), "{p} vs {}", 0.99 - step);
        assert!(close(s[0], m) && close(s[1], v), "{s:?}");
    }

    #[test]
    fn parse_reads_every_optimizer_and_refuses_bad_values() {
        assert_eq!(Optimizer::parse("sgd:0.1"), Ok(Optimizer::sgd(0.1)));
        assert_eq!(Optimizer::parse("momentum:0.1:0.5"), Ok(Optimizer::Momentum { lr: 0.1, momentum: 0.5 }));
        assert_eq!(Optimizer::parse("adam:0.001"), Ok(Optimizer::adam(0.001)));
        assert!(matches!(Optimizer::parse("adagrad:0.1"), Ok(Optimizer::Adagrad { .. })));
        for (bad, says) in [
            ("rmsprop:0.1", "unknown optimizer"),
            ("sgd", "missing"),
            ("sgd:x", "not a number"),
            ("momentum:0.1:1.5", "momentum 1.5"),
            ("adam:0.1:0.9:1.0", "beta2"),
        ] {
            let e = Optimizer::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
