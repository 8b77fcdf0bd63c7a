"""Host collector: ask the local NCCL RAS service for its report while the job hangs.

Why: RAS knows which communicator ranks lag or stopped answering, but only while
the job lives; the answer is stored raw (text, verbose text, JSON when the NCCL
version has it) so `analyze` can read it later. Interpretation is the parsers' job.
"""

from __future__ import annotations

import time

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collectors.base import CollectOptions, HostTarget, timed
from forensics.collect.budget import write_within
from forensics.ras_client import DEFAULT_ADDR, RasError, query


#: seconds between the two JSON reads whose collective counts tell a running job (analyze: progress)
LATER_READ_S = 1.0
#: seconds all RAS queries of one collection may take together (at most --timeout)
RAS_TOTAL_S = 20.0
NAME = "ras"
#: the files of RAS's answers, their names from the registry: status and verbose text, status JSON and the later read
STATUS_TXT = collector_file(NAME, "ras-text", "ras_status.txt")
VERBOSE_TXT = collector_file(NAME, "ras-text", "ras_verbose.txt")
STATUS_JSON = collector_file(NAME, "ras-json", "ras_status.json")
LATER_JSON = collector_file(NAME, "ras-json", "ras_status_later.json")


def _write_within(target: HostTarget, path, text: str, record: CollectorRecord, filename: str) -> bool:
    """Write a report within the collection's byte cap (cut, and said so, when it is near)."""
    written, cut = write_within(target.budget, path, text.encode("utf-8", "replace"), filename)
    if cut:
        record.details.setdefault("byte_cap", []).append(cut)
    return written


class RasCollector:
    """Implements HostCollector. Options: extra['ras_addr'] (default localhost:28028),
    extra['ras_later_s'] (the second JSON read's delay; 0 skips it)."""

    name = NAME

    def enabled(self, options: CollectOptions) -> bool:
        return options.extra.get("ras", True) is not False

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        return timed(self.name, lambda: self._collect(target, options))

    def _collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        addr = options.extra.get("ras_addr", DEFAULT_ADDR)
        # RAS answers in under a second; a stopped rank can make one query hang (seen on
        # the device: VERBOSE STATUS timed out), and the watchdog does not wait for us.
        per_read = max(1.0, min(options.timeout, 5.0))
        # one end for every query together: a peer that dribbles a byte every few seconds answers each
        # read in time, and held collect until it was killed
        total = float(options.extra.get("ras_total_s", max(per_read, min(options.timeout, RAS_TOTAL_S))))
        deadline = time.monotonic() + total
        record = CollectorRecord(name=self.name, status=Status.OK, details={"addr": addr, "deadline_s": total})
        asks = ((STATUS_TXT, False, False), (VERBOSE_TXT, True, False), (STATUS_JSON, False, True))
        errors = []
        for filename, verbose, js in asks:
            if time.monotonic() >= deadline:
                errors.append(f"{filename}: not asked: the {total:g} s for all RAS queries ran out")
                continue
            try:
                answer = query(addr, verbose=verbose, json_format=js, timeout=per_read, deadline=deadline)
            except RasError as err:
                if err.unreachable:
                    record.status = Status.SKIPPED
                    record.error = str(err)
                    return record
                errors.append(f"{filename}: {err}")
                continue
            path, rel = target.out(filename)
            if not _write_within(target, path, answer.text, record, filename):
                continue
            record.files.append(rel)
            record.details[filename] = {"seconds": round(answer.seconds, 3), "protocol": answer.server_protocol}
            if answer.cut:
                record.details[filename]["cut"] = answer.cut
                errors.append(f"{filename}: kept as far as it came: {answer.cut}")
        if STATUS_JSON in record.details:
            self._later_read(target, addr, per_read, options, record, errors, deadline)
        if errors:
            record.error = "; ".join(errors)
            if not record.files:
                record.status = Status.FAILED
        return record

    def _later_read(self, target: HostTarget, addr: str, per_read: float, options: CollectOptions,
                    record: CollectorRecord, errors: list[str], deadline: float) -> None:
        """The JSON answer again a moment later: counts that grew at every rank mean the job runs."""
        delay = float(options.extra.get("ras_later_s", LATER_READ_S) or 0.0)
        if delay <= 0 or time.monotonic() + delay >= deadline:
            return
        time.sleep(min(delay, 5.0))
        try:
            answer = query(addr, verbose=False, json_format=True, timeout=per_read, deadline=deadline)
        except RasError as err:
            errors.append(f"{LATER_JSON}: {err}")
            return
        path, rel = target.out(LATER_JSON)
        if not _write_within(target, path, answer.text, record, LATER_JSON):
            return
        record.files.append(rel)
        record.details[LATER_JSON] = {"seconds": round(answer.seconds, 3), "after_s": delay}
