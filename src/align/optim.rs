//! AdamW with inspectable state, so checkpoints can save and restore the moments exactly
//! (candle's `AdamW` keeps them private).

use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};

/// AdamW hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWParams {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay.
    pub beta1: f64,
    /// Second-moment decay.
    pub beta2: f64,
    /// Added to the root of the second moment.
    pub eps: f64,
    /// Decoupled weight decay (0 by default: decay towards zero pulls away from the anchor).
    pub weight_decay: f64,
    /// What the decay pulls the weights towards.
    #[serde(default)]
    pub decay_to: DecayTarget,
}

/// The target of AdamW's decoupled weight decay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecayTarget {
    /// Zero: `θ ← θ − lr·λ·θ` (ordinary AdamW).
    #[default]
    Zero,
    /// The weights the run started from (the base encoder's): `θ ← θ − lr·λ·(θ − θ₀)`, the
    /// decoupled form of L2-SP. It holds back weights that only noisy gradients move, which is
    /// where clean quality drifts.
    Base,
}

impl std::str::FromStr for DecayTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "zero" => Ok(DecayTarget::Zero),
            "base" => Ok(DecayTarget::Base),
            other => Err(format!("unknown decay target `{other}`; use zero or base")),
        }
    }
}

impl Default for AdamWParams {
    fn default() -> Self {
        AdamWParams {
            lr: 5e-5,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decay_to: DecayTarget::Zero,
        }
    }
}

/// What the learning rate does after the warm-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LrDecay {
    /// Stays at the peak.
    #[default]
    Constant,
    /// Falls linearly to zero at the end of the run.
    Linear,
}

impl std::str::FromStr for LrDecay {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "constant" => Ok(LrDecay::Constant),
            "linear" => Ok(LrDecay::Linear),
            other => Err(format!(
                "unknown learning-rate schedule `{other}`; use constant or linear"
            )),
        }
    }
}

/// The learning rate over a run: a linear warm-up to the peak over `warmup_steps`, then
/// [`LrDecay`]. (Warm-up keeps Adam's first, poorly estimated steps small; the decay lets a long
/// run settle instead of wandering away from the anchor at full rate.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LrSchedule {
    /// Steps of linear warm-up (0: start at the peak).
    pub warmup_steps: usize,
    /// After the warm-up.
    pub decay: LrDecay,
}

impl LrSchedule {
    /// The factor on the peak learning rate at 0-based `step` of a run of `total` steps, in
    /// (0, 1]: `(step+1)/warmup` during the warm-up, then 1 (constant) or
    /// `(total−step)/(total−warmup)` (linear).
    pub fn factor(&self, step: usize, total: usize) -> f64 {
        if step < self.warmup_steps {
            return (step + 1) as f64 / self.warmup_steps as f64;
        }
        match self.decay {
            LrDecay::Constant => 1.0,
            LrDecay::Linear => {
                let left = total.saturating_sub(step).max(1);
                let span = total.saturating_sub(self.warmup_steps).max(1);
                (left as f64 / span as f64).min(1.0)
            }
        }
    }
}

/// The first and second moments of one variable.
enum Moments {
    /// f32 variables on the CPU: plain vectors, updated in one fused pass.
    Host { m: Vec<f32>, v: Vec<f32> },
    /// Anything else (CUDA): tensors, updated with tensor ops.
    Device { m: Tensor, v: Tensor },
}

struct Slot {
    name: String,
    var: Var,
    moments: Moments,
    /// The starting values, when the decay pulls towards them.
    start: Option<Start>,
}

/// A variable's starting values, kept where its moments are.
enum Start {
    Host(Vec<f32>),
    Device(Tensor),
}

/// Whether a variable is updated by the fused host loop.
fn on_host(var: &Var) -> bool {
    var.device().is_cpu() && var.dtype() == candle_core::DType::F32
}

/// The AdamW update of one variable, fused into a single pass over its elements: moments in
/// place, the new values returned. (One pass instead of a dozen tensor ops with their
/// temporaries; the update is the same as the tensor form's.)
#[allow(clippy::too_many_arguments)]
fn fused_update(
    theta: &mut [f32],
    g: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    p: &AdamWParams,
    scale_m: f64,
    scale_v: f64,
    start: Option<&[f32]>,
) {
    let (b1, b2) = (p.beta1 as f32, p.beta2 as f32);
    let (c1, c2) = (1.0 - b1, 1.0 - b2);
    let (sm, sv, eps) = (scale_m as f32, scale_v as f32, p.eps as f32);
    let (lr, pull) = (p.lr as f32, (p.lr * p.weight_decay) as f32);
    let moments = theta.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut());
    match start {
        None => {
            for (((t, &g), m), v) in moments {
                *m = *m * b1 + g * c1;
                *v = *v * b2 + g * g * c2;
                let update = (*m * sm) / ((*v * sv).sqrt() + eps);
                *t = *t * (1.0 - pull) - update * lr;
            }
        }
        Some(start) => {
            for ((((t, &g), m), v), &t0) in moments.zip(start) {
                *m = *m * b1 + g * c1;
                *v = *v * b2 + g * g * c2;
                let update = (*m * sm) / ((*v * sv).sqrt() + eps);
                *t = *t - (*t - t0) * pull - update * lr;
            }
        }
    }
}

/// AdamW over named variables (the same update as `candle_nn::AdamW`).
pub struct AdamW {
    slots: Vec<Slot>,
    params: AdamWParams,
    /// Updates applied so far (the bias-correction step count).
    pub steps: u64,
}

impl AdamW {
    /// An optimiser for `vars` (name, variable), moments at zero.
    pub fn new(vars: Vec<(String, Var)>, params: AdamWParams) -> candle_core::Result<Self> {
        let slots = vars
            .into_iter()
            .map(|(name, var)| {
                let moments = if on_host(&var) {
                    let n = var.elem_count();
                    Moments::Host {
                        m: vec![0.0; n],
                        v: vec![0.0; n],
                    }
                } else {
                    Moments::Device {
                        m: var.zeros_like()?,
                        v: var.zeros_like()?,
                    }
                };
                let start = match params.decay_to {
                    DecayTarget::Zero => None,
                    DecayTarget::Base if on_host(&var) => {
                        Some(Start::Host(var.as_tensor().flatten_all()?.to_vec1()?))
                    }
                    DecayTarget::Base => Some(Start::Device(var.as_tensor().copy()?)),
                };
                Ok(Slot {
                    name,
                    var,
                    moments,
                    start,
                })
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(AdamW {
            slots,
            params,
            steps: 0,
        })
    }

    /// The learning rate of the next updates (for a schedule).
    pub fn set_lr(&mut self, lr: f64) {
        self.params.lr = lr;
    }

    /// Names of the variables it updates, in order.
    pub fn names(&self) -> Vec<&str> {
        self.slots.iter().map(|s| s.name.as_str()).collect()
    }

    /// One update from the gradients (variables without a gradient are left alone).
    pub fn step(&mut self, grads: &GradStore) -> candle_core::Result<()> {
        self.steps += 1;
        let p = self.params;
        let t = self.steps as i32;
        let scale_m = 1.0 / (1.0 - p.beta1.powi(t));
        let scale_v = 1.0 / (1.0 - p.beta2.powi(t));
        for slot in &mut self.slots {
            let theta = slot.var.as_tensor();
            let Some(g) = grads.get(theta) else {
                continue;
            };
            let g = g.detach();
            match &mut slot.moments {
                Moments::Host { m, v } => {
                    let mut values: Vec<f32> = theta.flatten_all()?.to_vec1()?;
                    let g: Vec<f32> = g
                        .to_dtype(candle_core::DType::F32)?
                        .flatten_all()?
                        .to_vec1()?;
                    let start = match &slot.start {
                        Some(Start::Host(s)) => Some(s.as_slice()),
                        _ => None,
                    };
                    fused_update(&mut values, &g, m, v, &p, scale_m, scale_v, start);
                    let next = Tensor::from_vec(values, theta.shape(), theta.device())?;
                    slot.var.set(&next)?;
                }
                Moments::Device { m, v } => {
                    let m_next = ((&*m * p.beta1)? + (&g * (1.0 - p.beta1))?)?;
                    let v_next = ((&*v * p.beta2)? + (g.sqr()? * (1.0 - p.beta2))?)?;
                    let update = ((&m_next * scale_m)? / ((&v_next * scale_v)?.sqrt()? + p.eps)?)?;
                    let pull = p.lr * p.weight_decay;
                    let decayed = match &slot.start {
                        Some(Start::Device(t0)) => (theta.detach() - ((theta - t0)? * pull)?)?,
                        _ => (theta.detach() * (1.0 - pull))?,
                    };
                    let next = (decayed - (update * p.lr)?)?;
                    slot.var.set(&next)?;
                    *m = m_next;
                    *v = v_next;
                }
            }
        }
        Ok(())
    }

    /// The moments as named tensors (`m.<name>`, `v.<name>`), for a checkpoint.
    pub fn state(&self) -> candle_core::Result<HashMap<String, Tensor>> {
        let mut out = HashMap::new();
        for s in &self.slots {
            let (m, v) = match &s.moments {
                Moments::Device { m, v } => (m.clone(), v.clone()),
                Moments::Host { m, v } => {
                    let host =
                        |x: &Vec<f32>| Tensor::from_vec(x.clone(), s.var.shape(), s.var.device());
                    (host(m)?, host(v)?)
                }
            };
            out.insert(format!("m.{}", s.name), m);
            out.insert(format!("v.{}", s.name), v);
        }
        Ok(out)
    }

    /// Restores moments saved by [`AdamW::state`]; every variable's moments must be present with
    /// the variable's shape.
    pub fn load_state(
        &mut self,
        state: &HashMap<String, Tensor>,
        steps: u64,
    ) -> Result<(), String> {
        for s in &mut self.slots {
            let mut loaded = Vec::with_capacity(2);
            for prefix in ["m", "v"] {
                let key = format!("{prefix}.{}", s.name);
                let t = state
                    .get(&key)
                    .ok_or_else(|| format!("optimizer state lacks {key}"))?;
                if t.dims() != s.var.dims() {
                    return Err(format!(
                        "optimizer state {key} has shape {:?}, the variable {:?}",
                        t.dims(),
                        s.var.dims()
                    ));
                }
                loaded.push(t.to_device(s.var.device()).map_err(|e| e.to_string())?);
            }
            let (v, m) = (loaded.pop(), loaded.pop());
            let (Some(m), Some(v)) = (m, v) else {
                return Err("optimizer state incomplete".into());
            };
            s.moments = match s.moments {
                Moments::Host { .. } => {
                    let host = |t: Tensor| -> Result<Vec<f32>, String> {
                        t.to_dtype(candle_core::DType::F32)
                            .and_then(|t| t.flatten_all())
                            .and_then(|t| t.to_vec1())
                            .map_err(|e| e.to_string())
                    };
                    Moments::Host {
                        m: host(m)?,
                        v: host(v)?,
                    }
                }
                Moments::Device { .. } => Moments::Device { m, v },
            };
        }
        self.steps = steps;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AdamW as the textbook writes it, in f64, for one scalar parameter over several steps.
    fn reference(theta0: f64, grads: &[f64], p: &AdamWParams) -> f64 {
        let (mut theta, mut m, mut v) = (theta0, 0.0, 0.0);
        for (i, g) in grads.iter().enumerate() {
            let t = (i + 1) as i32;
            m = p.beta1 * m + (1.0 - p.beta1) * g;
            v = p.beta2 * v + (1.0 - p.beta2) * g * g;
            let m_hat = m / (1.0 - p.beta1.powi(t));
            let v_hat = v / (1.0 - p.beta2.powi(t));
            let target = match p.decay_to {
                DecayTarget::Zero => 0.0,
                DecayTarget::Base => theta0,
            };
            theta = theta
                - p.lr * p.weight_decay * (theta - target)
                - p.lr * m_hat / (v_hat.sqrt() + p.eps);
        }
        theta
    }

    #[test]
    fn the_fused_update_is_adamw() {
        let p = AdamWParams {
            lr: 1e-2,
            weight_decay: 0.1,
            ..AdamWParams::default()
        };
        let thetas = [0.5f32, -1.25, 3.0, 0.0];
        let grads: [[f32; 4]; 3] = [
            [0.1, -0.2, 0.0, 1.5],
            [0.3, 0.1, -0.05, 1.0],
            [-0.2, 0.0, 0.4, 0.5],
        ];
        let var = Var::from_slice(&thetas, 4, &candle_core::Device::Cpu).unwrap();
        let mut opt = AdamW::new(vec![("w".into(), var.clone())], p).unwrap();
        for g in &grads {
            // A loss whose gradient with respect to w is g: sum(w * g).
            let gt = Tensor::from_slice(g, 4, &candle_core::Device::Cpu).unwrap();
            let loss = (var.as_tensor() * &gt).unwrap().sum_all().unwrap();
            opt.step(&loss.backward().unwrap()).unwrap();
        }
        let got: Vec<f32> = var.as_tensor().to_vec1().unwrap();
        for i in 0..4 {
            let gs: Vec<f64> = grads.iter().map(|g| g[i] as f64).collect();
            let want = reference(thetas[i] as f64, &gs, &p);
            assert!(
                (got[i] as f64 - want).abs() < 1e-6,
                "element {i}: {} vs {want}",
                got[i]
            );
        }
        // The moments survive a state round trip.
        let state = opt.state().unwrap();
        let mut again = AdamW::new(vec![("w".into(), var.clone())], p).unwrap();
        again.load_state(&state, opt.steps).unwrap();
        assert_eq!(
            again.state().unwrap()["m.w"].to_vec1::<f32>().unwrap(),
            state["m.w"].to_vec1::<f32>().unwrap()
        );
    }

    #[test]
    fn decay_to_base_pulls_towards_the_start_on_both_paths() {
        let p = AdamWParams {
            lr: 1e-2,
            weight_decay: 5.0,
            decay_to: DecayTarget::Base,
            ..AdamWParams::default()
        };
        let thetas = [0.5f64, -1.25, 3.0];
        let grads = [[0.1f64, -0.2, 0.0], [0.3, 0.1, -0.05], [-0.2, 0.0, 0.4]];
        // f32 on the CPU takes the fused loop; f64 takes the tensor path.
        for dtype in [candle_core::DType::F32, candle_core::DType::F64] {
            let var = Var::from_tensor(
                &Tensor::from_slice(&thetas, 3, &candle_core::Device::Cpu)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap(),
            )
            .unwrap();
            let mut opt = AdamW::new(vec![("w".into(), var.clone())], p).unwrap();
            for g in &grads {
                let gt = Tensor::from_slice(g, 3, &candle_core::Device::Cpu)
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap();
                let loss = (var.as_tensor() * &gt).unwrap().sum_all().unwrap();
                opt.step(&loss.backward().unwrap()).unwrap();
            }
            let got: Vec<f64> = var
                .as_tensor()
                .to_dtype(candle_core::DType::F64)
                .unwrap()
                .to_vec1()
                .unwrap();
            for i in 0..3 {
                let gs: Vec<f64> = grads.iter().map(|g| g[i]).collect();
                let want = reference(thetas[i], &gs, &p);
                let towards_zero = reference(
                    thetas[i],
                    &gs,
                    &AdamWParams {
                        decay_to: DecayTarget::Zero,
                        ..p
                    },
                );
                assert!(
                    (got[i] - want).abs() < 1e-6,
                    "{dtype:?} {i}: {} vs {want}",
                    got[i]
                );
                assert!((want - towards_zero).abs() > 1e-3, "the target matters");
            }
        }
        assert_eq!("base".parse::<DecayTarget>(), Ok(DecayTarget::Base));
        assert!("one".parse::<DecayTarget>().is_err());
    }

    #[test]
    fn the_schedule_warms_up_then_holds_or_decays() {
        let constant = LrSchedule::default();
        assert_eq!(constant.factor(0, 10), 1.0);
        assert_eq!(constant.factor(9, 10), 1.0);
        let warm = LrSchedule {
            warmup_steps: 4,
            decay: LrDecay::Constant,
        };
        let f: Vec<f64> = (0..6).map(|s| warm.factor(s, 6)).collect();
        assert_eq!(f, vec![0.25, 0.5, 0.75, 1.0, 1.0, 1.0]);
        let linear = LrSchedule {
            warmup_steps: 2,
            decay: LrDecay::Linear,
        };
        let f: Vec<f64> = (0..6).map(|s| linear.factor(s, 6)).collect();
        assert_eq!(f, vec![0.5, 1.0, 1.0, 0.75, 0.5, 0.25]);
        // Never zero, never above the peak, also for a warm-up longer than the run.
        let long = LrSchedule {
            warmup_steps: 50,
            decay: LrDecay::Linear,
        };
        assert!((0..10).all(|s| long.factor(s, 10) > 0.0 && long.factor(s, 10) <= 1.0));
        assert_eq!("linear".parse::<LrDecay>(), Ok(LrDecay::Linear));
        assert!("cosine".parse::<LrDecay>().is_err());
    }
}
