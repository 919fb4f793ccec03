// One policy step of the suite's arm control, compiled: per physics step the
// arm term's bounded damped-least-squares step (or joint step) and bias
// compensation, then mj_step; the recorded readings after each step. The same
// arithmetic as mjlab_tasks/common/actions.py (torch), in float64.
//
// Built on first use by mjlab_tasks/common/native_control.py against the
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

// One control computation without stepping (parity tests).
void arm_control_targets(mjData* d, const ArmControl* c, const double* params,
                         double* last_dq) {
  arm_control(d, c, params, last_dq);
}

}  // extern "C"
