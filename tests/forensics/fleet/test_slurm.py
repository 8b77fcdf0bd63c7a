"""`forensics collect --slurm-job` on a real one-node Slurm cluster, with a hung 2-rank gloo job as the batch job."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
import subprocess
import sys
import time

import pytest

from fleet_simjob import REPO
from fleet_slurm import OneNodeSlurm, ensure_slurm

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = ensure_slurm()
    if reason:
        pytest.skip(reason)
    # not under pytest's 0700 tmp: munged must reach it
    cluster = OneNodeSlurm(Path(tempfile.mkdtemp(prefix="forensics-slurm-")))
    try:
        cluster.start()
    except (subprocess.CalledProcessError, RuntimeError, OSError) as err:
        cluster.stop()
        pytest.skip(f"could not start a one-node Slurm cluster here: {err}")
    yield cluster
    cluster.stop()
    shutil.rmtree(cluster.root, ignore_errors=True)


def _batch_script(progress, port: int) -> str:
    return f"""#!/bin/sh
export PYTHONPATH={REPO} MASTER_ADDR=127.0.0.1 MASTER_PORT={port} WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 OMP_NUM_THREADS=1
for r in 0 1; do
  RANK=$r LOCAL_RANK=$r {sys.executable} -m forensics.demo.job --fault sleep --culprit 1 --fault-step 3 --steps 6 \
--progress-dir {progress} &
done
wait
"""


def _hung(progress) -> bool:
    try:
        return ((progress / "rank1.progress").read_text().startswith("fault")
                and (progress / "rank0.progress").read_text().strip() == "enter step 3")
    except OSError:
        return False


def test_slurm_job_collection_names_the_culprit(slurm, tmp_path):
    pytest.importorskip("torch")
    progress = tmp_path / "progress"
    progress.mkdir()
    job = slurm.sbatch(_batch_script(progress, 29941))
    try:
        slurm.wait_running(job)
        deadline = time.monotonic() + 120
        while not _hung(progress) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert _hung(progress), "the batch job did not hang as planned"
        out = tmp_path / "bundle"
        done = subprocess.run([sys.executable, "-m", "forensics", "collect", "--slurm-job", job, "--remote-python",
                               sys.executable,
                               "--host-timeout", "60", "-o", str(out),
                               "--json"], capture_output=True, text=True, env=slurm.env, timeout=120)
        summary = json.loads(done.stdout)
        assert done.returncode == 0, done.stderr
        assert list(summary["hosts"].values())[0]["status"] == "ok"
        assert summary["ranks"] == 2 and summary["missing_ranks"] == []
        analyzed = subprocess.run([sys.executable, "-m", "forensics", "analyze", str(out)], capture_output=True,
                                  text=True, env=slurm.env, timeout=120)
        assert "rank 1" in analyzed.stdout.splitlines()[0], analyzed.stdout
        # no collection step left behind in the job
        steps = subprocess.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"], capture_output=True, text=True,
                               env=slurm.env).stdout
        assert "python" not in steps and f"{job}.0" not in steps
    finally:
        slurm.cancel(job)


def test_unknown_or_bad_job_ids_are_clear_errors(slurm):
    bad = subprocess.run([sys.executable, "-m", "forensics", "collect", "--slurm-job", "1;id"], capture_output=True,
                         text=True, env=slurm.env)
    # wording is the behaviour: the CLI's refusal of a bad job id
    assert bad.returncode == 2 and "not a Slurm job id" in bad.stderr
    gone = subprocess.run([sys.executable, "-m", "forensics", "collect", "--slurm-job", "999999"], capture_output=True,
                          text=True, env=slurm.env)
    assert gone.returncode == 2 and "999999" in gone.stderr
