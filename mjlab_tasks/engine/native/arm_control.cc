// One policy step of the suite's arm control, compiled: per physics step the
// arm term's bounded damped-least-squares step (or joint step) and bias
// compensation, then mj_step; the recorded readings after each step. The same
// arithmetic as mjlab_tasks/common/actions.py (torch), in float64.
//
// Built on first use by mjlab_tasks/engine/native_control.py against the
// headers and library of the installed `mujoco` wheel; called through ctypes,
// which releases the GIL, from the C engine's worker threads (one world per
// call, so worlds step in parallel).

#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <mujoco/mujoco.h>

// MuJoCo's thread-local log handler, which its own Python bindings use to
// turn mju_error into an exception (the default handler exits the process).
extern "C" {
MJAPI mjfLogHandler _mjPRIVATE_setTlsLogHandler(mjfLogHandler handler);
MJAPI mjfLogHandler _mjPRIVATE_getGlobalLogHandler(void);
}

namespace {

constexpr int kMaxArm = 8;

thread_local jmp_buf error_jump;
thread_local char error_message[1024];

// Errors jump back to arm_control_run; warnings go where they would have.
void on_log(const mjLogMessage* message) {
  if (message->level >= mjLOG_ERROR) {
    snprintf(error_message, sizeof(error_message), "%s", message->subject);
    longjmp(error_jump, 1);
  }
  mjfLogHandler global = _mjPRIVATE_getGlobalLogHandler();
  if (global) global(message);
}

}  // namespace

extern "C" {

// Fixed per task (from the action term and the compiled model).
struct ArmControl {
  int32_t mode;  // 0: no arm term, 1: Cartesian pose, 2: joint targets.
  int32_t n;     // arm joints (<= kMaxArm)
  int32_t bias_compensation;
  int32_t site;  // tool site (mode 1)
  double max_dq;
  double damping;
  int32_t qpos_adr[kMaxArm];
  int32_t dof_adr[kMaxArm];
  int32_t joint[kMaxArm];
  int32_t ctrl[kMaxArm];
};

// Layout of one world's per-policy-step parameters (doubles):
// [0:3] target position, [3:7] target quaternion (w, x, y, z),
// [7] has target (0 or 1), [8:8+n] joint targets (mode 2).
enum { kPos = 0, kQuat = 3, kHasTarget = 7, kJointTargets = 8 };

static void rotation_error(const double* target_quat, const double* xmat,
                           double* err) {
  // axis_angle_from_quat(quat_mul(target, quat_inv(current))), as mjlab's
  // math does it (w >= 0, Taylor expansion below 1e-6 rad).
  double cur[4], inv[4], q[4];
  mju_mat2Quat(cur, xmat);
  mju_negQuat(inv, cur);
  mju_mulQuat(q, target_quat, inv);
  if (q[0] < 0) {
    for (int k = 0; k < 4; k++) q[k] = -q[k];
  }
  double mag = sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  double half = atan2(mag, q[0]);
  double angle = 2.0 * half;
  double s = fabs(angle) > 1e-6 ? sin(half) / angle : 0.5 - angle * angle / 48.0;
  for (int k = 0; k < 3; k++) err[k] = q[k + 1] / s;
}

static void cartesian_step(const mjData* d, const ArmControl* c,
                           const double* params, double* dq) {
  const int n = c->n;
  double err[6] = {0};
  if (params[kHasTarget] != 0.0) {
    const double* p = d->site_xpos + 3 * c->site;
    for (int k = 0; k < 3; k++) err[k] = params[kPos + k] - p[k];
    rotation_error(params + kQuat, d->site_xmat + 9 * c->site, err + 3);
  }
  // Geometric Jacobian of a hinge chain: column j = [a_j x (p - o_j); a_j].
  double jac[6 * kMaxArm];
  const double* p = d->site_xpos + 3 * c->site;
  for (int j = 0; j < n; j++) {
    const double* a = d->xaxis + 3 * c->joint[j];
    const double* o = d->xanchor + 3 * c->joint[j];
    double r[3] = {p[0] - o[0], p[1] - o[1], p[2] - o[2]};
    jac[0 * n + j] = a[1] * r[2] - a[2] * r[1];
    jac[1 * n + j] = a[2] * r[0] - a[0] * r[2];
    jac[2 * n + j] = a[0] * r[1] - a[1] * r[0];
    jac[3 * n + j] = a[0];
    jac[4 * n + j] = a[1];
    jac[5 * n + j] = a[2];
  }
  // dq = J^T (J J^T + lambda^2 I)^-1 err.
  double jjt[36], y[6];
  mju_mulMatMatT(jjt, jac, jac, 6, n, 6);
  for (int k = 0; k < 6; k++) jjt[7 * k] += c->damping * c->damping;
  mju_cholFactor(jjt, 6, 0);
  mju_cholSolve(y, jjt, err, 6);
  mju_mulMatTVec(dq, jac, y, 6, n);
}

static void arm_control(mjData* d, const ArmControl* c, const double* params,
                        double* last_dq) {
  const int n = c->n;
  double dq[kMaxArm];
  if (c->mode == 1) {
    cartesian_step(d, c, params, dq);
  } else {
    for (int j = 0; j < n; j++) {
      double q = d->qpos[c->qpos_adr[j]];
      dq[j] = params[kHasTarget] != 0.0 ? params[kJointTargets + j] - q : 0.0;
    }
  }
  // Direction-preserving bound: the whole step is scaled, never clipped.
  double largest = 0;
  for (int j = 0; j < n; j++) largest = fmax(largest, fabs(dq[j]));
  double scale = fmin(c->max_dq / fmax(largest, 1e-12), 1.0);
  for (int j = 0; j < n; j++) {
    last_dq[j] = dq[j];
    last_dq[n + j] = dq[j] * scale;
    d->ctrl[c->ctrl[j]] = d->qpos[c->qpos_adr[j]] + dq[j] * scale;
    if (c->bias_compensation) {
      d->qfrc_applied[c->dof_adr[j]] = d->qfrc_bias[c->dof_adr[j]];
    }
  }
}

// Runs `nsteps` physics steps of one world. `record_addr` holds `nrecord`
// addresses of doubles inside this world's mjData, copied into
// record[step * nrecord + k] after each step. `last_dq` receives the last
// step's unlimited and limited joint steps [2 * n]. Returns 0, or -1 when
// MuJoCo raised an error, its message in `error` (the world's state is then
// undefined). Only trivially destructible objects live across the jump.
int arm_control_run(const mjModel* m, mjData* d, const ArmControl* c,
                    const double* params, int nsteps,
                    const double* const* record_addr, int nrecord,
                    double* record, double* last_dq, char* error,
                    int error_size) {
  mjfLogHandler previous = _mjPRIVATE_setTlsLogHandler(&on_log);
  if (setjmp(error_jump) != 0) {
    _mjPRIVATE_setTlsLogHandler(previous);
    snprintf(error, error_size, "%s", error_message);
    return -1;
  }
  for (int s = 0; s < nsteps; s++) {
    if (c->mode != 0) arm_control(d, c, params, last_dq);
    mj_step(m, d);
    double* out = record + (size_t)s * nrecord;
    for (int k = 0; k < nrecord; k++) out[k] = *record_addr[k];
  }
  _mjPRIVATE_setTlsLogHandler(previous);
  return 0;
}

// A straight line of the commanded tool point, or a hold (the glass
// examiner's hand): the arm control above every physics step, its target
// moved along the line, until the line ends or the wrist force passes `stop`;
// a hold ends once every listed free joint has been still for `still_need`
// steps (or after `n` steps).
struct HandMove {
  double p0[3];
  double p1[3];
  double h0;         // heading at the line's start [rad]
  double dh;         // heading change over the line
  double stop;       // force threshold [N]: the line stops above it
  double still_lin;  // a free joint is still below these speeds
  double still_ang;
  double peak;    // in/out: the largest force
  double force;   // out: the last step's force
  int32_t n;      // steps of the line (a hold: the most steps)
  int32_t k;      // in/out: steps done
  int32_t hold;   // 1: hold the target until still
  int32_t still;  // in/out: consecutive still steps
  int32_t still_need;
  int32_t steps;         // in/out: the world's physics step count
  int32_t sample_every;  // record `sample` every this many world steps
  int32_t film_every;    // record `film` every this many (0: never)
  int32_t force_adr;     // sensordata address of the force vector
  int32_t hit;           // out: stopped by the force
  int32_t nsamples;      // out
  int32_t nfilm;         // out
  int32_t nfree;
  int32_t free_dof[16];
};

static void hand_quat(double heading, double* quat) {
  // Tool y (the pads' width) along the heading, z down, x across.
  double c = cos(heading), s = sin(heading);
  double mat[9] = {-s, c, 0, c, s, 0, 0, 0, -1};
  mju_mat2Quat(quat, mat);
}

static bool still(const mjData* d, const HandMove* h) {
  for (int g = 0; g < h->nfree; g++) {
    const double* v = d->qvel + h->free_dof[g];
    if (mju_norm3(v) > h->still_lin || mju_norm3(v + 3) > h->still_ang) {
      return false;
    }
  }
  return true;
}

static void copy_out(const double* const* addr, int count, double* out) {
  for (int k = 0; k < count; k++) out[k] = *addr[k];
}

// Runs one HandMove on one world; `params` holds the arm control's target
// (the pose is overwritten on a line, kept on a hold). A sample row is the
// world's time, then the `sample_addr` values. Returns 0, or -1 on a MuJoCo
// error (message in `error`).
int hand_move_run(const mjModel* m, mjData* d, const ArmControl* c,
                  double* params, HandMove* h, const double* const* sample_addr,
                  int nsample_addr, double* samples, int max_samples,
                  const double* const* film_addr, int nfilm_addr, double* film,
                  int max_film, char* error, int error_size) {
  mjfLogHandler previous = _mjPRIVATE_setTlsLogHandler(&on_log);
  if (setjmp(error_jump) != 0) {
    _mjPRIVATE_setTlsLogHandler(previous);
    snprintf(error, error_size, "%s", error_message);
    return -1;
  }
  double last_dq[2 * kMaxArm];
  h->hit = h->nsamples = h->nfilm = 0;
  params[kHasTarget] = 1.0;
  while (h->k < h->n) {
    h->k++;
    if (!h->hold) {
      double a = (double)h->k / h->n;
      for (int j = 0; j < 3; j++) {
        params[kPos + j] = h->p0[j] + a * (h->p1[j] - h->p0[j]);
      }
      hand_quat(h->h0 + a * h->dh, params + kQuat);
    }
    arm_control(d, c, params, last_dq);
    mj_step(m, d);
    h->steps++;
    h->force = mju_norm3(d->sensordata + h->force_adr);
    h->peak = fmax(h->peak, h->force);
    if (h->steps % h->sample_every == 0 && h->nsamples < max_samples) {
      double* row = samples + (size_t)h->nsamples++ * (nsample_addr + 1);
      row[0] = d->time;
      copy_out(sample_addr, nsample_addr, row + 1);
    }
    if (h->film_every > 0 && h->steps % h->film_every == 0 &&
        h->nfilm < max_film) {
      copy_out(film_addr, nfilm_addr, film + (size_t)h->nfilm++ * nfilm_addr);
    }
    if (h->hold) {
      h->still = still(d, h) ? h->still + 1 : 0;
      if (h->still >= h->still_need) break;
    } else if (h->force > h->stop) {
      h->hit = 1;
      break;
    }
  }
  _mjPRIVATE_setTlsLogHandler(previous);
  return 0;
}

// One control computation without stepping (parity tests).
void arm_control_targets(mjData* d, const ArmControl* c, const double* params,
                         double* last_dq) {
  arm_control(d, c, params, last_dq);
}

}  // extern "C"
