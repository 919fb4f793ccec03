"""Sharded demonstration collection on Ray (scripts/collect_demos_ray.py).

With Ray installed (the optional 'ray' extra): a local Ray cluster of two
nodes with one CPU each (two raylets on this machine, as `ray start` would
make on two machines) runs the two shards of a tiny CubeTray-UR5-RG2
collection on the C engine, one per node, through the real command line with
--address; the merged file must equal, dataset for dataset and attribute
for attribute, the local sequential collect_demos.py --shard 0/2, 1/2 plus
merge_demos.py. Without Ray those tests skip; the one-line refusals (Ray
missing, a kept shard file in the way) run either way.
"""

from __future__ import annotations

import json
import re
import sys

import h5py
import numpy as np
import pytest
from script_runner import ROOT, run_script

sys.path.insert(0, str(ROOT / "scripts"))  # The tools and their helpers.

import cli_args  # noqa: E402
import collect_demos_ray  # noqa: E402

JOB = ["--task", "CubeTray-UR5-RG2", "--engine", "mujoco", "--seed", "3"]
JOB += ["--num-envs", "2", "--episodes", "4", "--max-steps", "15"]


def one_error_line(err: str) -> str:
  lines = [line for line in err.splitlines() if line.strip()]
  assert len(lines) == 1 and lines[0].startswith("error: "), lines
  return lines[0]


def test_without_ray_names_the_extra(tmp_path, monkeypatch, capsys):
  """Ray is optional: without it, one line naming the extra, and no file."""
  import importlib.util

  find_spec = importlib.util.find_spec
  monkeypatch.setattr(
    importlib.util,
    "find_spec",
    lambda name, *a: None if name == "ray" else find_spec(name, *a),
  )
  out = tmp_path / "all.hdf5"
  argv = [*JOB, "--shards", "2", "--output", str(out)]
  with pytest.raises(SystemExit) as exit_:
    collect_demos_ray.main(cli_args.parse(collect_demos_ray.Args, argv))
  assert exit_.value.code == 2
  line = one_error_line(capsys.readouterr().err)
  assert "pip install 'manipulation-suite[ray]'" in line
  assert list(tmp_path.iterdir()) == []


def test_kept_shard_in_the_way_is_refused(tmp_path, capsys):
  out = tmp_path / "all.hdf5"
  (tmp_path / "all.shard-1-of-2.hdf5").write_bytes(b"")
  argv = [*JOB, "--shards", "2", "--keep-shards", "--output", str(out)]
  with pytest.raises(SystemExit):
    collect_demos_ray.check_args(cli_args.parse(collect_demos_ray.Args, argv))
  assert "all.shard-1-of-2.hdf5 already exists" in one_error_line(
    capsys.readouterr().err
  )


@pytest.fixture(scope="module")
def two_node_cluster():
  """A local Ray cluster: a head node and a second node, one CPU each."""
  pytest.importorskip("ray")
  from ray.cluster_utils import Cluster

  small = {"num_cpus": 1, "object_store_memory": 80 * 2**20}
  cluster = Cluster(
    initialize_head=True, head_node_args={**small, "include_dashboard": False}
  )
  try:
    cluster.add_node(**small)
    cluster.wait_for_nodes()
    yield cluster.address
  finally:
    cluster.shutdown()


def read_all(path) -> dict:
  """Every dataset (values, dtype) and attribute of a file, by HDF5 path.
  env_args without 'git': other work in a shared checkout can change its
  dirty flag or commit between the two collections of this test."""
  out = {}

  def visit(name, item):
    attrs = dict(item.attrs)
    if "env_args" in attrs:
      attrs["env_args"] = json.loads(attrs["env_args"])
      attrs["env_args"].pop("git")
    out[name] = {"attrs": attrs}
    if isinstance(item, h5py.Dataset):
      out[name]["dtype"] = item.dtype
      out[name]["values"] = item[()]

  with h5py.File(path, "r") as f:
    visit("/", f)
    f.visititems(visit)
  return out


def assert_same_files(a, b) -> None:
  first, second = read_all(a), read_all(b)
  assert sorted(first) == sorted(second)
  for name, entry in first.items():
    other = second[name]
    assert entry["attrs"].keys() == other["attrs"].keys(), name
    for key, value in entry["attrs"].items():
      assert np.array_equal(value, other["attrs"][key]), (name, key)
    if "values" in entry:
      assert entry["dtype"] == other["dtype"], name
      assert np.array_equal(entry["values"], other["values"]), name


def test_two_node_cluster_equals_sequential(two_node_cluster, tmp_path):
  # One shard per node, through the command line as on a real cluster.
  ray_out = tmp_path / "ray" / "all.hdf5"
  argv = [*JOB, "--shards", "2", "--address", two_node_cluster]
  out = run_script("collect_demos_ray.py", *argv, "--output", str(ray_out), timeout=600)
  assert out.returncode == 0, out.stderr
  done = re.findall(r"\[\d/2\] shard (\d)/2 on .* \(Ray node (\w+)\)", out.stdout)
  assert sorted(k for k, _ in done) == ["0", "1"], out.stdout
  assert done[0][1] != done[1][1], "both shards ran on one node"
  assert "merged 2 files: 4 demos" in out.stdout

  # The same shards collected here one after the other, then merged.
  import collect_demos
  import merge_demos

  local = tmp_path / "local"
  shards = [local / f"shard_{k}.hdf5" for k in range(2)]
  local.mkdir()
  for k, path in enumerate(shards):
    shard_argv = [*JOB, "--device", "cpu", "--shard", f"{k}/2", "--output", str(path)]
    assert collect_demos.main(cli_args.parse(collect_demos.Args, shard_argv)) == 0
  merged = local / "all.hdf5"
  inputs = [*map(str, shards), "--output", str(merged)]
  assert merge_demos.main(cli_args.parse(merge_demos.Args, inputs)) == 0

  assert_same_files(ray_out, merged)
  with h5py.File(ray_out, "r") as f:
    seeds = sorted(int(d.attrs["seed"]) for d in f["data"].values())
    assert seeds == [3, 4, 5, 6]
    assert json.loads(f["data"].attrs["env_args"])["seed_ranges"] == [[3, 5], [5, 7]]
  # The shard files lived in a temporary folder beside the output, now gone.
  assert [p.name for p in ray_out.parent.iterdir()] == ["all.hdf5"]


def fake_shard(fail_shard: int, others_s: float, fail_after: str | None = None):
  """A stand-in for the shard task (no simulation): shard ``fail_shard``
  raises (once the file ``fail_after`` exists, if given), the others return
  a few bytes after ``others_s``."""

  def run(argv, scripts):
    import os
    import time

    k = int(argv[argv.index("--shard") + 1].split("/")[0])
    if k == fail_shard:
      deadline = time.monotonic() + 120
      while (
        fail_after and not os.path.exists(fail_after) and time.monotonic() < deadline
      ):
        time.sleep(0.1)
      raise RuntimeError("simulated shard failure")
    time.sleep(others_s)
    return {
      "data": b"shard %d" % k,
      "log": "",
      "node": "n",
      "node_id": "n",
      "seconds": 0,
    }

  return run


@pytest.mark.parametrize("keep", [False, True])
def test_failed_shard(two_node_cluster, tmp_path, monkeypatch, capsys, keep):
  """A shard that fails ends the run with one line naming it; nothing under
  --output. Without --keep-shards the other shard (a minute to go) is
  cancelled and no shard file stays; with it, the shard that finished (before
  the other failed) stays."""
  import logging
  import time

  import ray

  kept = tmp_path / "all.shard-0-of-2.hdf5"
  fake = fake_shard(1, 0, str(kept)) if keep else fake_shard(0, 60)
  monkeypatch.setattr(collect_demos_ray, "collect_shard", fake)
  out = tmp_path / "all.hdf5"
  argv = [*JOB, "--shards", "2", "--output", str(out)]
  argv += ["--keep-shards"] if keep else []
  ray.init(address=two_node_cluster, logging_level=logging.WARNING)
  capsys.readouterr()  # Ray's own messages on connecting.
  try:
    start = time.perf_counter()
    with pytest.raises(SystemExit) as exit_:
      collect_demos_ray.main(cli_args.parse(collect_demos_ray.Args, argv))
    elapsed = time.perf_counter() - start
  finally:
    ray.shutdown()
  assert exit_.value.code == 2
  line = one_error_line(capsys.readouterr().err)
  failed = f"error: shard {1 if keep else 0}/2 failed: simulated shard failure"
  assert line.startswith(failed), line
  if keep:
    assert "finished shards are kept" in line
    assert [p.name for p in tmp_path.iterdir()] == [kept.name]
    assert kept.read_bytes() == b"shard 0"
  else:
    assert elapsed < 45, "the other shard was not cancelled"
    assert list(tmp_path.iterdir()) == []
