"""Ray's own JobSubmissionClient (PyPI `ray`, pinned in .ci/run) against the
dashboard stand-in: a working dir it packs and uploads itself, env vars,
status, logs whole and tailed, a failure's exit code, stop, list, delete
and an unknown id. Usage: ray_job_client.py http://<pod-ip>:8265"""

import asyncio
import os
import sys
import tempfile
import time

from ray.job_submission import JobStatus, JobSubmissionClient

client = JobSubmissionClient(sys.argv[1])


def wait(sid, until=JobStatus.is_terminal):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = client.get_job_status(sid)
        if until(status):
            return status
        time.sleep(0.05)
    raise SystemExit(f"job {sid} stayed {status}")


with tempfile.TemporaryDirectory() as wd:
    with open(os.path.join(wd, "data.txt"), "w") as f:
        f.write("from the working dir\n")
    os.mkdir(os.path.join(wd, "pkg"))
    with open(os.path.join(wd, "pkg", "inner.txt"), "w") as f:
        f.write("nested\n")
    sid = client.submit_job(
        entrypoint="cat data.txt pkg/inner.txt; echo A=$A",
        runtime_env={"working_dir": wd, "env_vars": {"A": "1"}},
        metadata={"k": "v"},
        submission_id="py-wd",
    )
assert sid == "py-wd", sid
assert wait(sid) == JobStatus.SUCCEEDED, client.get_job_info(sid)
logs = client.get_job_logs(sid)
assert "from the working dir\nnested\nA=1\n" in logs, logs
info = client.get_job_info(sid)
assert info.driver_exit_code == 0 and info.metadata == {"k": "v"}, info
assert info.start_time <= info.end_time and info.runtime_env["working_dir"].startswith("gcs://_ray_pkg_"), info

failing = client.submit_job(entrypoint="echo about-to-fail; exit 3")
assert failing.startswith("raysubmit_"), failing
assert wait(failing) == JobStatus.FAILED
info = client.get_job_info(failing)
assert info.driver_exit_code == 3 and "about-to-fail" in info.message, info


async def tail(sid):
    return "".join([lines async for lines in client.tail_job_logs(sid)])


tailed = client.submit_job(entrypoint="for i in 1 2 3; do echo line$i; sleep 0.2; done")
out = asyncio.run(tail(tailed))
assert "line1\nline2\nline3\n" in out, out

sleeper = client.submit_job(entrypoint="sleep 60")
wait(sleeper, until=lambda s: s == JobStatus.RUNNING)
assert client.stop_job(sleeper) is True
assert wait(sleeper) == JobStatus.STOPPED
assert client.stop_job(sleeper) is False

ids = [job.submission_id for job in client.list_jobs()]
assert ids == ["py-wd", failing, tailed, sleeper], ids
assert client.delete_job(sleeper) is True
try:
    client.get_job_info(sleeper)
    raise SystemExit("a deleted job was found")
except RuntimeError as e:
    assert "does not exist" in str(e), e
print("ok")
