"""Train the glass-pushing imitation solution (experts/glass_push/imitation.py).

1. Collect: a teacher solution (``shove`` by default) works training tables;
   before each of its pushes the top view and an averaged look are taken, and
   after the run the examiner's record gives the hand path each push really
   followed (50 Hz). A sample is one decision: every standing glass's crop
   and readings, which one the teacher pushed, and that push's working part
   of the path (from the end of the descent to the lift) relative to the
   glass. Where the teacher stopped (refused what stood), every glass is a
   "do not push" example.
2. Train ``ChunkNet`` (CPU): which glass (a logit per glass), the chunk's
   waypoints and heading; the 8 symmetries of the square as augmentation;
   the last tables held out for validation.
3. Write ``policy.pt`` (the solution's checkpoint), ``samples.npz``,
   ``summary.json`` and ``loss.png`` into a new folder.

  python scripts/train_glass_imitation.py --tables 0-63 --output runs/glass_imitation
  python scripts/glass_push_exam.py --solution imitation --tables 10000-10049 \\
    --output runs/glass_imitation_exam

(the exam reads the shipped ``policies/glass_imitation/policy.pt``; copy a new
one there to score it). See docs/glass_push.md, "The imitation solution".
"""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from cli_args import (
  check_at_least,
  check_file,
  check_new_folder,
  create_folder,
  fail,
  parse,
)
from measure_glass_perception import training_tables


@dataclass
class Args:
  output: Path
  """New folder for policy.pt, samples.npz, summary.json, loss.png."""
  tables: str = "0-63"
  """Training tables, A-B inclusive (0-9999)."""
  teacher: Literal["shove", "geometric"] = "shove"
  """The solution whose pushes are imitated."""
  pushes: int = 15
  """Push budget per table while collecting."""
  valid_tables: int = 8
  """The last this many tables with decisions are held out for validation."""
  epochs: int = 200
  """Passes over the training decisions (each in one random symmetry)."""
  batch_size: int = 32
  """Decisions per gradient step."""
  lr: float = 1e-3
  """Adam learning rate."""
  width: int = 32
  """Channels of the first convolution (ChunkNet)."""
  jobs: int = 2
  """Examiner worker processes while collecting."""
  seed: int = 0
  """Seed for the network's initialization and the batches."""
  samples: Path | None = None
  """Train on the decisions of an earlier run (its samples.npz) instead of
  collecting; --tables, --teacher and --pushes are then not used."""


class Recorder:
  """The teacher's examiner, seen through: before each push, the top view
  and an averaged look are kept (one decision); at a refusal, the same once
  (a decision to stop)."""

  def __init__(self, examiner):
    self._examiner, self.decisions = examiner, []
    self._stopped = False

  def __getattr__(self, name):
    return getattr(self._examiner, name)

  def _decision(self, request: dict | None) -> None:
    from experts.glass_push.shove import averaged_look

    readings = averaged_look(self._examiner)
    picture = self._examiner.top_view()
    self.decisions.append(
      {
        "readings": readings,
        "picture": picture,
        "glass": None if request is None else request["glass"],
        "heading": None if request is None else float(request["heading"]),
      }
    )

  def push(self, request: dict) -> dict:
    self._decision(request)
    try:
      return self._examiner.push(request)
    except Exception:  # No push made (budget spent, bad request): no decision.
      self.decisions.pop()
      raise

  def refuse(self, glass: int, reason: str) -> None:
    if not self._stopped:
      self._stopped = True
      self._decision(None)
    self._examiner.refuse(glass, reason)


def working_part(path: np.ndarray) -> np.ndarray:
  """The recorded push's rows at working height: the longest run within
  10 mm of its lowest point, from the end of the descent to the lift."""
  low = path[:, 3] < path[:, 3].min() + 0.01
  best, start = (0, 0), None
  for i, flag in enumerate([*low, False]):
    if flag and start is None:
      start = i
    elif not flag and start is not None:
      best = max(best, (i - start, start), key=lambda r: r[0])
      start = None
  n, s = best
  return path[s : s + n]


def collect_share(tables: list[int], teacher, pushes: int) -> list[dict]:
  """Decisions of ``teacher`` on ``tables`` (one examiner worker)."""
  from mjlab_tasks.glass_push import Exam

  recorders = {}

  def solve(examiner):
    recorders[examiner.table] = rec = Recorder(examiner)
    teacher(rec)

  with Exam(tables, pushes=pushes) as exam:
    errors = exam.run_together(solve)
    records = exam.records()
  samples = []
  for table, error, record in zip(tables, errors, records, strict=True):
    if error:
      raise RuntimeError(f"table {table}: the teacher failed: {error}")
    paths = iter(a["path"] for a in record["actions"])
    for d in recorders[table].decisions:
      path = None if d["glass"] is None else next(paths)
      samples.append(dict(d, table=table, path=path))
  return samples


def to_arrays(samples: list[dict]) -> dict:
  """Per decision: crops [C, 3, P, P], features [C, F] of its standing
  glasses (from ``start``, ``count`` of them), which one was pushed (-1:
  none), the push's heading class and its working part's waypoints [K, 3]
  in the push frame relative to the glass."""
  from experts.glass_push import imitation as im
  from experts.glass_push.common import arrays

  crops, feats, start, count, chosen, points, classes, tables, steps = (
    [] for _ in range(9)
  )
  for s in samples:
    readings = s["readings"]
    ids, xy, *_, standing = arrays(readings)
    rows = [k for k in range(len(readings)) if standing[k]]
    if not rows:
      continue
    start.append(len(crops))
    count.append(len(rows))
    crops.extend(im.crop(s["picture"], xy[k]) for k in rows)
    feats.extend(im.features(readings, k) for k in rows)
    tables.append(s["table"])
    if s["glass"] is None or s["glass"] not in ids[rows]:
      chosen.append(-1)
      points.append(np.zeros((im.K, 3)))
      classes.append(0)
      steps.append(np.nan)
      continue
    k = int(np.flatnonzero(ids == s["glass"])[0])
    part = working_part(s["path"])
    pick = np.linspace(0, len(part) - 1, im.K).round().astype(int)
    way = part[pick][:, 1:4].copy()
    way[:, :2] -= xy[k]
    cls = im.heading_class(s["heading"])
    chosen.append(rows.index(k))
    points.append(im.push_frame(way, im.heading_of(cls)))
    classes.append(cls)
    steps.append(
      float(np.median(np.linalg.norm(np.diff(part[:, 1:4], axis=0), axis=1)))
    )
  return {
    "crops": np.stack(crops).astype(np.float32),
    "features": np.stack(feats).astype(np.float32),
    "start": np.array(start),
    "count": np.array(count),
    "chosen": np.array(chosen),
    "points": np.stack(points).astype(np.float32),
    "heading_class": np.array(classes),
    "table": np.array(tables),
    "step": np.array(steps),
  }


def batch(data: dict, rows, rng):
  """One random symmetry per decision: images, features, decision index per
  candidate, chosen candidate (-1 none), chunk and heading-class targets."""
  import torch

  from experts.glass_push import imitation as im

  images, feats, owner, chosen, points, classes = [], [], [], [], [], []
  for j, d in enumerate(rows):
    turn, mirror = int(rng.integers(4)), bool(rng.integers(2))
    s, n = data["start"][d], data["count"][d]
    for c in range(n):
      f = data["features"][s + c].copy()
      img, _, _, f[3:5] = im.dihedral(
        data["crops"][s + c], np.zeros((1, 2)), 0.0, f[3:5], turn, mirror
      )
      images.append(img)
      feats.append(f)
      owner.append(j)
    if data["chosen"][d] >= 0:
      way = data["points"][d] / im.CHUNK_SCALE
      if mirror:  # The push frame's across axis flips; along and height stay.
        way = way * np.array([1.0, -1.0, 1.0])
      points.append(way)
      classes.append(im.class_symmetry(int(data["heading_class"][d]), turn, mirror))
    chosen.append(data["chosen"][d])

  def t(a):
    return torch.as_tensor(np.asarray(a), dtype=torch.float32)

  return (
    t(np.stack(images)),
    t(np.stack(feats)),
    torch.as_tensor(owner),
    torch.as_tensor(chosen),
    t(np.stack(points)) if points else torch.zeros(0, im.K, 3),
    torch.as_tensor(classes, dtype=torch.long),
  )


def losses(net, data, rows, rng):
  """Choice (cross-entropy over each decision's glasses plus a "stop"
  logit fixed at 0), heading (cross-entropy over the classes) and chunk
  (squared error) on the pushed glasses, and top-1 choice accuracy."""
  import torch
  import torch.nn.functional as F

  images, feats, owner, chosen, points, classes = batch(data, rows, rng)
  logit, head, chunk = net(images, feats)
  choice, hits, positive = [], [], []
  offset = 0
  for j in range(len(rows)):
    m = owner == j
    scores = torch.cat([logit[m], torch.zeros(1)])  # the last one: stop
    target = int(chosen[j]) if chosen[j] >= 0 else len(scores) - 1
    choice.append(F.cross_entropy(scores[None], torch.tensor([target])))
    hits.append(int(scores.argmax()) == target)
    if chosen[j] >= 0:
      positive.append(offset + int(chosen[j]))
    offset += int(m.sum())
  pos = torch.as_tensor(positive, dtype=torch.long)
  none = torch.zeros(())
  head_loss = F.cross_entropy(head[pos], classes) if len(pos) else none
  chunk_loss = F.mse_loss(chunk[pos], points) if len(pos) else none
  return torch.stack(choice).mean(), head_loss, chunk_loss, float(np.mean(hits))


def train(data: dict, args: Args, valid: np.ndarray) -> tuple:
  """ChunkNet trained on the decisions not in ``valid``; per-epoch losses."""
  import torch
  from tqdm import tqdm

  from experts.glass_push.imitation import ChunkNet

  torch.manual_seed(args.seed)
  torch.set_num_threads(1)
  rng = np.random.default_rng(args.seed)
  net = ChunkNet(args.width)
  opt = torch.optim.Adam(net.parameters(), lr=args.lr)
  train_rows = np.flatnonzero(~valid)
  history = []
  for _ in tqdm(range(args.epochs), desc="training", unit="epoch"):
    net.train()
    order = rng.permutation(train_rows)
    totals = np.zeros(4)
    for b in range(0, len(order), args.batch_size):
      parts = losses(net, data, order[b : b + args.batch_size], rng)
      loss = parts[0] + parts[1] + parts[2]
      opt.zero_grad()
      loss.backward()
      opt.step()
      totals += [float(p.detach()) if hasattr(p, "detach") else p for p in parts]
    n = max(1, math.ceil(len(order) / args.batch_size))
    net.eval()
    with torch.no_grad():
      v = [float(p) for p in losses(net, data, np.flatnonzero(valid), rng)]
    history.append({"train": list(totals / n), "valid": v})
  return net, history


def plot(history: list[dict], path: Path) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  for split, style in (("train", "-"), ("valid", "--")):
    rows = np.array([h[split] for h in history])
    for i, name in enumerate(("choice", "heading", "chunk")):
      axes[0].plot(rows[:, i], style, label=f"{split} {name}")
    axes[1].plot(rows[:, 3], style, label=f"{split} choice accuracy")
  axes[0].set_yscale("log")
  for ax in axes:
    ax.set_xlabel("epoch")
    ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)


def decisions(args: Args, tables: list[int]) -> tuple[dict, float]:
  """The teacher's decisions as arrays (``to_arrays``): collected on
  ``tables``, or read from ``--samples``; and the collection's seconds."""
  if args.samples is not None:
    with np.load(args.samples) as f:
      return {k: f[k] for k in f.files}, 0.0
  from experts.glass_push import SOLUTIONS
  from mjlab_tasks.glass_push.examiner.world import RENDERERS_KEPT as share

  start = time.perf_counter()
  # As many tables per examiner worker as it keeps picture renderers: a
  # worker drawing more tables in turn rebuilds them.
  shares = [tables[k : k + share] for k in range(0, len(tables), share)]
  with ThreadPoolExecutor(max_workers=args.jobs) as pool:
    parts = pool.map(
      lambda s: collect_share(s, SOLUTIONS[args.teacher], args.pushes), shares
    )
    samples = [s for part in parts for s in part]
  return to_arrays(samples), time.perf_counter() - start


def check_args(args: Args) -> list[int]:
  """Every flag checked before anything is built; the training tables."""
  tables = training_tables(args.tables)
  check_at_least(1, pushes=args.pushes, jobs=args.jobs, epochs=args.epochs)
  check_at_least(1, batch_size=args.batch_size, width=args.width)
  if not 0 < args.valid_tables < len(tables):
    fail(
      f"--valid-tables must be between 1 and {len(tables) - 1} for {len(tables)} "
      f"tables, got {args.valid_tables}."
    )
  if not math.isfinite(args.lr) or args.lr <= 0:
    fail(f"--lr must be a positive number, got {args.lr}.")
  if args.samples is not None:
    check_file(args.samples, "--samples")
  check_new_folder(args.output)
  return tables


def main(args: Args) -> int:
  tables = check_args(args)
  import torch

  create_folder(args.output)
  data, collect_s = decisions(args, tables)
  np.savez_compressed(args.output / "samples.npz", **data)
  pushed = data["chosen"] >= 0
  if pushed.sum() == 0:
    fail("the teacher made no push on these tables: nothing to imitate.")
  held_out = np.unique(data["table"])[-args.valid_tables :]
  valid = np.isin(data["table"], held_out)
  start = time.perf_counter()
  net, history = train(data, args, valid)
  train_s = time.perf_counter() - start
  spacing = float(np.nanmedian(data["step"]))
  torch.save(
    {
      "state_dict": net.state_dict(),
      "width": args.width,
      "spacing": spacing,
      "teacher": args.teacher,
      "tables": args.tables,
    },
    args.output / "policy.pt",
  )
  plot(history, args.output / "loss.png")
  write_summary(args, data, held_out, history, collect_s, train_s, spacing)
  return 0


def write_summary(args, data, held_out, history, collect_s, train_s, spacing) -> None:
  pushed = data["chosen"] >= 0
  valid = np.isin(data["table"], held_out)
  summary = {
    "args": {k: str(v) for k, v in vars(args).items()},
    "tables": sorted(int(t) for t in np.unique(data["table"])),
    "held_out_tables": sorted(int(t) for t in held_out),
    "decisions": int(len(data["chosen"])),
    "pushes_imitated": int(pushed.sum()),
    "stops": int((~pushed).sum()),
    "valid_decisions": int(valid.sum()),
    "spacing_m": spacing,
    "final": history[-1],
    "collect_s": round(collect_s, 1),
    "train_s": round(train_s, 1),
  }
  (args.output / "summary.json").write_text(json.dumps(summary, indent=1))
  print(
    f"{summary['decisions']} decisions ({summary['pushes_imitated']} pushes) from "
    f"{len(summary['tables'])} tables in {collect_s:.0f} s; trained {args.epochs} "
    f"epochs in {train_s:.0f} s; valid choice accuracy {history[-1]['valid'][3]:.2f}; "
    f"wrote {args.output / 'policy.pt'}"
  )


if __name__ == "__main__":
  raise SystemExit(main(parse(Args)))
