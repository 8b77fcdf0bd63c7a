"""Reading a hung job's evidence and judging it: everything here only reads files and data.

Nothing here runs a process or touches a live target, and nothing imports `forensics/`. Only subpackages,
in the order of the flow (each imports only those listed before it: scripts/import_map.py's LAYERS):

- `input/`: hostile input read safely: files (`safeio`), archives (`archive`), JSON (`bounded_json`),
  folder trees (`walk`), integers (`ints`), the manifest's schema (`manifest_schema`); the error root (`errors`);
- `model/`: the one typed evidence model, every stage's types (events, stacks, findings, the manifest's
  records, summaries; `ranges`: rank lists as text);
- `readers/`: one reader per format (`prefix`: launchers' line wrappers peeled; `stamps`: log timestamps
  compared), with `steps/` (step time series), `stacks/` (stack classes and trees), `knowledge/` (the
  known-failure knowledge base);
- `gather/`: a source opened (`source`), each file recognised and given its reader (`registry`), read once
  into the `Evidence` the judges read (`evidence`), the garbage collector paused meanwhile (`quiet_gc`);
- `judges/`: pure functions of the evidence, each returning typed findings (`gpu_binding`: the GPU a rank used);
- `scale/`: a job of many ranks judged from its hosts' digests;
- `pipeline/`: `analyze` (source -> read -> judge -> merge) and the arbiter (`merge`, `sinks`).
"""
