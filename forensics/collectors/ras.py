"""Host collector: ask the local NCCL RAS service for its report while the job hangs.

Why: RAS knows which communicator ranks lag or stopped answering, but only while
the job lives; the answer is stored raw (text, verbose text, JSON when the NCCL
version has it) so `analyze` can read it later. Interpretation is the parsers' job.
"""

from __future__ import annotations

from parsers.model.manifest import CollectorRecord, Status
from forensics.collectors.base import CollectOptions, HostTarget, timed
from forensics.ras_client import DEFAULT_ADDR, RasError, query


class RasCollector:
    """Implements HostCollector. Options: extra['ras_addr'] (default localhost:28028)."""

    name = "ras"

    def enabled(self, options: CollectOptions) -> bool:
        return options.extra.get("ras", True) is not False

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        return timed(self.name, lambda: self._collect(target, options))

    def _collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        addr = options.extra.get("ras_addr", DEFAULT_ADDR)
        # RAS answers in under a second; a stopped rank can make one query hang (seen on
        # the device: VERBOSE STATUS timed out), and the watchdog does not wait for us.
        per_read = max(1.0, min(options.timeout, 5.0))
        record = CollectorRecord(name=self.name, status=Status.OK, details={"addr": addr})
        asks = (("ras_status.txt", False, False), ("ras_verbose.txt", True, False), ("ras_status.json", False, True))
        errors = []
        for filename, verbose, js in asks:
            try:
                answer = query(addr, verbose=verbose, json_format=js, timeout=per_read)
            except RasError as err:
                if err.unreachable:
                    record.status = Status.SKIPPED
                    record.error = str(err)
                    return record
                errors.append(f"{filename}: {err}")
                continue
            path, rel = target.out(filename)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(answer.text)
            record.files.append(rel)
            record.details[filename] = {"seconds": round(answer.seconds, 3), "protocol": answer.server_protocol}
        if errors:
            record.error = "; ".join(errors)
            if not record.files:
                record.status = Status.FAILED
        return record
