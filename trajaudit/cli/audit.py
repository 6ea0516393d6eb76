"""``trajaudit audit``: diagnose a batch of failed runs (critical step, category, agent, evidence)."""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

import trajaudit.report as report_layer
from trajaudit import __version__
from trajaudit.cli.cluster import (
    ClusterOptions,
    check_cluster_use,
    cluster_options,
    run_on_cluster,
    write_diagnoses,
)
from trajaudit.cli.common import (
    EXIT_FINDINGS,
    LLMOptions,
    RuleUse,
    check_output_folder,
    console,
    display_width,
    fail,
    handle_errors,
    input_roles,
    llm_config_for,
    llm_options,
    print_line,
    refuse_overwriting_input,
    refuse_resume_into,
    refuse_same_outputs,
    report_load,
    say_never_fired,
    terminal_safe,
    warn_degraded,
    warn_incomplete,
    wrap_items,
    write_parts,
)
from trajaudit.cli.options import (
    check_input_paths,
    io_options,
    note_unread_files,
    run_timeout_option,
    warn_output_name,
)
from trajaudit.cli.outputs import OutputSet, ResumeJournal, resume_key_of, without_own_outputs
from trajaudit.cli.unknowns import Unknowns
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.packs.pack import shipped_packs
from trajaudit.engine.packs.selection import load_rules
from trajaudit.engine.run.batch import BatchResult, audit_paths
from trajaudit.engine.run.pipeline import AuditResult, AuditSpec
from trajaudit.engine.strategies.judge_weights import load_weights
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.taxonomy import load_taxonomy
from trajaudit.engine.trace.forced_format import mapping_for
from trajaudit.engine.trace.inputs import is_url
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.trace.loader import FLAG_NON_UTF8
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.errors import LLMUnreachableError, Problem
from trajaudit.run_budget import DEFAULT_RUN_TIMEOUT

if TYPE_CHECKING:
    from rich.console import Console

    from trajaudit.report.ci import RunFindings
    from trajaudit.report.html import HtmlReport
    from trajaudit.report.markdown import MarkdownReport

_DEFAULT_OUTPUT = {"jsonl": "diagnoses.jsonl", "sarif": "trajaudit.sarif", "junit": "trajaudit-junit.xml"}


@click.command("audit")
@click.argument("paths", nargs=-1, required=True)
@click.option("--rules", "rules", multiple=True, metavar="PACK",
              help="Rule pack file or shipped pack name (repeatable), applied to every run.")
@click.option("--no-default-packs", is_flag=True,
              help="Do not apply the shipped generic pack, nor the shipped domain packs selected by the run's tools.")
@click.option("--tools", type=click.Path(exists=True, dir_okay=False),
              help="Tool schemas (OpenAI function list) for SCHEMA rules.")
@click.option("--taxonomy", default="agentrx", show_default=True, help="Taxonomy for the root-cause category.")
@click.option("-s", "--strategy", default="offline", show_default=True,
              help="How to diagnose: offline (no LLM), the baselines first, last, random, first-violation, or an "
                   "LLM strategy (all-at-once, step-by-step, binary-search, agentrx, searchauditor, drift, hybrid).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Where to write the --format output; '-' for stdout. Default: diagnoses.jsonl (jsonl), "
                   "trajaudit.sarif (sarif), trajaudit-junit.xml (junit). With jsonl, a .parquet name writes a "
                   "Parquet table (docs/parquet.md); with --scheduler, an fsspec URL.")
@click.option("--report", "report", type=click.Path(dir_okay=False),
              help="Also write a report: .html (self-contained) or .md.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True, help="Worker processes.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for randomized strategies.")
@click.option("--repair", is_flag=True,
              help="Also write a repair directive per run (Diagnosis.repair): synthesized by the LLM when an "
                   "endpoint is configured, else a template built from the diagnosis (labelled as such).")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress bar or summary table (warnings that results are incomplete still go to stderr).")
@click.option("--judge-weights", "judge_weights", type=click.Path(exists=True, dir_okay=False),
              help="The offline judge's weights (JSON from `trajaudit judge fit`); default: the shipped ones.")
@click.option("--resume", is_flag=True,
              help="Append to an existing -o instead of replacing it: runs already diagnosed there with the same "
                   "options are skipped, the rest are audited and each diagnosis is appended as it finishes "
                   "(a batch killed mid-way is finished by running the same command again). --format jsonl only; "
                   "a file holding anything but diagnoses is refused. A --report covers this invocation's runs.")
@run_timeout_option(help="Rule-evaluation time budget per run (z3 time included); when used up, the checks left "
                         "are 'unknown' and the diagnosis is marked degraded (metadata.degraded; a warning on "
                         "stderr, also with -q).")
@io_options(["jsonl", "sarif", "junit"], "jsonl",
            help="What -o holds: jsonl (one diagnosis per line), sarif (SARIF 2.1.0: one result per rule "
                 "violation) or junit (JUnit XML: a test case per run x rule).")
@llm_options
@cluster_options
@handle_errors
def audit(paths: tuple[str, ...], rules: tuple[str, ...], tools: str | None, taxonomy: str, strategy: str,
          output: str | None, report: str | None, jobs: int, seed: int, quiet: bool, out_format: str,
          fmt: str | None, mapping: str | None, no_default_packs: bool, repair: bool, judge_weights: str | None,
          llm_opts: LLMOptions, cluster: ClusterOptions, resume: bool = False,
          run_timeout: float = DEFAULT_RUN_TIMEOUT) -> None:
    """Audit every run under PATHS (files, folders, globs) and write one diagnosis per run.

    Each diagnosis names the critical step (0-based index of the message in the input file's
    message list), the root-cause category, the responsible agent, a confidence, a rationale citing
    evidence addresses, and ranked alternative candidates. Runs that cannot be read or audited are
    reported and skipped; the exit code is 1 when any run was skipped, 2 on usage errors and when
    the LLM endpoint cannot be connected to (the batch stops at the first such failure, after the
    client's retries, instead of failing every run in turn; timeouts and HTTP errors fail one run).

    LLM strategies (all-at-once, step-by-step, binary-search, agentrx, ...) need an endpoint: the
    --base-url/--model options or their environment variables, or --llm-config.

    \b
    Examples:
      trajaudit audit runs/ -o diagnoses.jsonl --report report.html
      trajaudit audit runs.json --rules my_pack.yaml --tools tools.json --jobs 4
      trajaudit audit runs.json --strategy all-at-once --base-url http://localhost:8000/v1 --model M
      trajaudit audit runs/ --format sarif -o trajaudit.sarif   # for code scanning in CI
      trajaudit audit s3://bucket/traces/ --scheduler tcp://scheduler:8786 -o diagnoses.parquet
      trajaudit audit runs/ --judge-weights weights.json   # weights from `trajaudit judge fit`
    """
    output = output or _DEFAULT_OUTPUT[out_format]
    check_cluster_use(cluster, paths, output, jobs)
    check_input_paths([p for p in paths if not is_url(p)])  # URLs (--scheduler only) are opened by fsspec
    if not quiet:  # a .json.gz or .log trace in a folder is not read: say so before the batch
        note_unread_files([p for p in paths if not is_url(p)])
    llm = _llm_for(strategy, llm_opts, repair)
    paths = _without_own_outputs(paths)
    _check_outputs(paths, rules, tools, mapping, output, report, out_format, resume, cluster)
    weights = load_weights(judge_weights) if judge_weights else None  # a bad file stops here, named
    _warn_taxonomy_without_rules(strategy, taxonomy, rules, default_packs=not no_default_packs)
    adapter = mapping_for(fmt, mapping)  # a bad mapping (expression too deep) is refused before the batch
    config = AuditConfig(taxonomy=taxonomy, seed=seed, run_timeout=run_timeout)
    spec = AuditSpec(strategy=strategy, rules=rules, tools=tools, config=config,
                     default_packs=not no_default_packs, llm=llm, repair=repair, judge_weights=weights)
    journal = ResumeJournal.for_spec(output, spec, fmt, mapping) if resume else None
    title = f"trajaudit report ({strategy}{', --resume: the runs audited by this invocation' if resume else ''})"
    kept = _Kept(report, title=title, journal=journal, findings=out_format != "jsonl",
                 key=resume_key_of(spec, fmt, mapping))
    batch = _run_batch(paths, spec, kept, _BatchWhere(jobs, fmt, mapping, adapter, cluster, output),
                       with_logs=bool(report) or out_format != "jsonl", quiet=quiet)
    report_load(kept.flagged, batch.problems)
    _stop_if_nothing_loaded(kept, batch)  # before -o/--report are replaced (or created)
    _stop_if_nothing_audited(kept, batch)
    if journal is not None:
        print_line(console(err=True), journal.summary(batch.skipped))
    # -o and --report are staged, then renamed together (a signal meanwhile: both old; during: both new)
    with OutputSet() as outs:
        if journal is None:
            _write_results(kept, out_format, output, rules, batch.problems, outs)
        if report and kept.report is not None and not _write_report(kept.report, report, batch, journal, outs):
            report = None  # not written: the summary does not point at it
        outs.commit()
    if not quiet:
        _summary(kept, len(batch.problems), output, report)
    else:  # -q hides the summary, not a warning that the diagnoses rest on partial evidence
        _warn_degraded(kept)
    if batch.problems:
        sys.exit(EXIT_FINDINGS)


#: the stages of a :class:`~trajaudit.errors.Problem` of the input itself (unreadable, not in the
#: format, nothing to diagnose), not of its audit (rules, judge, LLM, repair, a worker)
_INPUT_STAGES = ("read", "load")


def _without_own_outputs(paths: tuple[str, ...]) -> tuple[str, ...]:
    """``paths`` as the files to audit, without the trajaudit output files found in its folders and
    globs (``audit runs/`` writes ``runs/diagnoses.jsonl`` by default: the next ``audit runs/`` read it as
    a trace and refused to overwrite it), with a note naming what was left out (stderr, also with ``-q``)."""
    return without_own_outputs(paths, lambda note: print_line(console(err=True), note))


def _write_report(rep: HtmlReport | MarkdownReport, report: str, batch: BatchResult,
                  journal: ResumeJournal | None, outs: OutputSet) -> bool:
    """Stage ``--report`` in ``outs`` (``False``: not written). With ``--resume`` it covers the runs audited by this invocation only (a report
    section needs the run and its validation log, which the ``-o`` lines do not hold): that is said on
    stderr, and when every run was already diagnosed the report is not replaced by an empty one."""
    if journal is not None and not journal.writer and batch.skipped:
        rep.close()
        print_line(console(err=True), f"note: --report {report} was not written: every run was already diagnosed "
                                      "in the -o file, none was audited by this invocation (a report covers the runs "
                                      "an invocation audits; audit without --resume for one of every run)")
        return False
    write_parts(report, rep.render_parts(batch.problems), outs)
    rep.close()
    if journal is not None and journal.found.lines:  # the file held diagnoses the report does not show
        print_line(console(err=True), f"note: --report {report} covers the runs audited by this invocation only, not "
                                      f"the diagnoses already in {journal.output} (audit without --resume for a "
                                      "report of every run)")
    return True


def _stop_if_nothing_loaded(kept: _Kept, batch: BatchResult) -> None:
    """Stop the command (exit 2) before the ``-o``, ``--report`` and ``--format`` outputs are replaced
    by an empty batch's output (or created) when no trace file was found, or when no run could be
    loaded: every input was skipped for a problem of its own (reported above, file and line named:
    unreadable, not in the format, no agent message), as ``trajaudit check`` does. A batch where some
    run loaded goes on as documented (its diagnoses written, exit 1 for the skipped runs)."""
    if kept.lines or batch.skipped or any(p.stage not in _INPUT_STAGES for p in batch.problems):
        return
    if not batch.problems:
        fail("no trace files found under the given paths")
    files = list(dict.fromkeys(p.file for p in batch.problems))
    named = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    fail(f"no trajectory could be loaded from {named} (each skipped input is named above): nothing was written")


def _stop_if_nothing_audited(kept: _Kept, batch: BatchResult) -> None:
    """Stop the command (exit 1, as for any skipped run: the options were fine, the runs failed) before
    the ``-o``, ``--report`` and ``--format`` outputs are replaced by an empty batch's output (or
    created) when runs loaded but none could be audited (an LLM endpoint answering nothing usable, a
    strategy failing on every run: each named above). The existing outputs are kept as they were."""
    if kept.lines or batch.skipped or not batch.problems:
        return
    fail(f"no run could be audited ({len(batch.problems)} skipped, each named above): nothing was written",
         code=EXIT_FINDINGS)


def _warn_taxonomy_without_rules(strategy: str, taxonomy: str, rules: tuple[str, ...], *, default_packs: bool) -> None:
    """Warn (stderr, also with ``-q``) when the offline strategy is asked for a ``--taxonomy`` that no rule
    applied targets: its categories are the categories the findings' rules target, the shipped packs
    target agentrx categories, and a category outside the taxonomy is reported ``inconclusive`` — so
    every diagnosis would be inconclusive. Not refused: a ``--rules`` pack may target that taxonomy
    (and the critical steps are still chosen). An unknown taxonomy or pack is left to the batch to report."""
    if strategy != "offline":
        return
    try:
        ids = set(load_taxonomy(taxonomy).ids)
        refs = [*(shipped_packs() if default_packs else []), *rules]
        targets = {t for ref in refs for r in load_rules([ref], None) for t in r.spec.targets}  # warm: no YAML
    except Exception:  # noqa: BLE001 - reported, file and line named, where the batch loads them
        return
    if not ids & targets:
        warn_incomplete(f"--taxonomy {taxonomy}: no rule applied targets a {taxonomy} category (the shipped packs "
                        "target agentrx categories), so every offline diagnosis will be 'inconclusive' (the "
                        f"critical steps are still chosen); use --taxonomy agentrx, or --rules with a pack whose "
                        f"rules target {taxonomy} categories")


def _llm_for(strategy: str, llm_opts: LLMOptions, repair: bool) -> Any:
    """The LLM configuration of the run (``None`` without one): required by an LLM strategy, used by
    ``--repair`` when configured. An unknown strategy or a missing endpoint stops the command (exit 2)."""
    try:
        chosen = default_strategies().get(strategy)
    except LookupError as e:
        fail(str(e.args[0]))
    return llm_config_for(llm_opts, needed=chosen.needs_llm, wanted=repair, what=f"strategy {strategy!r}")


def _check_outputs(paths: tuple[str, ...], rules: tuple[str, ...], tools: str | None, mapping: str | None,
                   output: str, report: str | None, out_format: str, resume: bool, cluster: ClusterOptions) -> None:
    """Refuse, before the batch runs (exit 2), a ``--report`` that is neither HTML nor Markdown, a
    ``--resume`` that cannot append (not JSONL, stdout, a cluster), two outputs with one path, an output
    that would overwrite an input and an output whose folder cannot be written (an fsspec URL output is
    the cluster's to open)."""
    if report and not report.endswith((".html", ".htm", ".md", ".markdown")):
        fail(f"--report must end in .html or .md, got {report!r}")
    if resume and out_format != "jsonl":
        fail(f"--resume appends JSONL diagnoses to -o: it cannot continue a --format {out_format} file (written "
             "whole at the end of the batch); resume the JSONL, or drop --resume")
    if resume:
        refuse_resume_into(output)  # '-', /dev/stdout, a FIFO: the journal would read the pipe it writes to
    given = [*paths, *rules, *([tools] if tools else []), *([mapping] if mapping else [])]
    roles = input_roles(rules=rules, tools=[tools], mapping=mapping)
    if resume and cluster.scheduler:
        fail("--resume is not supported with --scheduler: run the cluster batch again without it, or resume "
             "locally")
    refuse_same_outputs({"-o/--output": output, "--report": report})
    if not is_url(output):
        refuse_overwriting_input(output, given, roles=roles)
        check_output_folder(output)
    refuse_overwriting_input(report, given, "--report", roles)
    check_output_folder(report, "--report")
    parquet = out_format == "jsonl" and output.lower().endswith(".parquet")  # written as Parquet (write_diagnoses)
    warn_output_name("-o", output, "parquet" if parquet else out_format)  # after the refusals: a refused -o gets its error alone


@dataclass(frozen=True)
class _BatchWhere:
    """Where and how ``audit`` runs the batch: worker processes, the forced input format, the mapping
    (its name for a cluster's workers, compiled for local ones), the cluster options and the output
    named when an unreachable endpoint stops the batch."""

    jobs: int
    fmt: str | None
    mapping: str | None
    adapter: Any
    cluster: ClusterOptions
    output: str


def _run_batch(paths: tuple[str, ...], spec: AuditSpec, kept: _Kept, where: _BatchWhere, *, with_logs: bool,
               quiet: bool) -> BatchResult:
    """Audit every run under ``paths`` locally (``where.jobs`` processes) or on the cluster, each result
    handed to ``kept`` as it finishes, with a progress bar on a terminal (not with ``quiet``).

    An unreachable LLM endpoint stops the batch (exit 2, saying what was kept); a resume journal is
    closed whatever happens."""
    err = None if quiet else console(err=True)  # -q: no console (nor rich) for a bar that is never drawn
    show_progress = err is not None and err.is_terminal
    journal = kept.journal
    with _progress_bar(err, show_progress) as bar:
        task = bar.add_task("audit", total=None) if bar is not None else None

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            if where.cluster.scheduler:
                return run_on_cluster(where.cluster, paths, spec, fmt=where.fmt, mapping=where.mapping,
                                      progress=progress if show_progress else None, on_result=kept.add,
                                      with_logs=with_logs)
            return audit_paths(paths, spec, jobs=where.jobs, format=where.fmt, mapping=where.adapter,
                               progress=progress if show_progress else None,
                               on_result=kept.add, skip=journal.done if journal else None)
        except LLMUnreachableError as e:
            said = (f"the diagnoses finished so far are in {where.output} (--resume goes on from there)" if journal
                    else "no diagnosis was written")
            cached = getattr(spec.llm, "cache_path", None)
            kept_answers = (f"answers already received are in the LLM cache ({cached}), so a re-run does not ask "
                            "for them again" if cached else "the LLM cache is off (--no-cache): a re-run asks "
                            "for every answer again")
            fail(f"{e}\nthe batch was stopped (every further run would fail the same way): {said} ({kept_answers})")
            raise  # not reached: fail exits
        finally:
            if journal is not None:
                journal.close()


def _progress_bar(err: Console | None, show: bool) -> contextlib.AbstractContextManager[Any]:
    """The batch's progress bar on ``err`` (transient), or, when none is shown (``-q``, not a terminal),
    a stand-in that yields ``None``: ``rich.progress`` (≈ 6 ms of imports) is loaded only for a bar."""
    if not show:
        return contextlib.nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("auditing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    console=err, transient=True)


def _write_results(kept: _Kept, out_format: str, output: str, rules: tuple[str, ...],
                   problems: list[Problem], outs: OutputSet) -> None:
    """Write the batch's diagnoses (JSONL, or Parquet/fsspec as :func:`write_diagnoses` picks) or its
    SARIF / JUnit findings, in run order, to ``output`` (staged in ``outs``, replaced when it commits)
    or stdout (``-``); the SARIF log also reports the skipped inputs (``problems``), the runs out of
    time and the unknown checks."""
    if out_format == "jsonl":
        lines = [kept.lines[i] for i in sorted(kept.lines)]
        if output == "-":
            sys.stdout.write("".join(line + "\n" for line in lines))
        else:
            write_diagnoses(output, lines, outs)
        return
    findings = [kept.findings[i] for i in sorted(kept.findings)]
    ci = report_layer.ci  # the SARIF/JUnit writers, imported on first use (trajaudit.report)
    text = (ci.sarif_text(findings, titles=report_layer.html.rule_titles(rules), version=__version__,
                          skipped=problems)
            if out_format == "sarif" else ci.junit_xml(findings, skipped=problems, fail_on_unknown="never"))
    if output == "-":
        sys.stdout.write(text)
    else:
        write_parts(output, (text,), outs)  # staged, as the JSONL


class _Kept:
    """What ``audit`` keeps of each run while the batch streams its results (memory for thousands of
    runs: a full result holds every pass record of the run's validation log): the diagnosis as its
    JSONL line, a summary row, and — for ``--report`` only — the run's report section, rendered now and
    spooled (:class:`~trajaudit.report.html.HtmlReport`, :class:`~trajaudit.report.markdown.MarkdownReport`)."""

    def __init__(self, report: str | None, title: str, journal: ResumeJournal | None = None,
                 findings: bool = False, key: str = "") -> None:
        self.journal = journal
        self.key = key  # the options' fingerprint each JSONL line carries (metadata.resume_key)
        self.keep_findings = findings
        self.findings: dict[int, RunFindings] = {}
        self.lines: dict[int, str] = {}
        self.rows: dict[int, tuple[str, str, str, str, float, str, str]] = {}
        self.sources: dict[int, tuple[str, int | None]] = {}  # each row's file and record (for equal run ids)
        self.flagged: list[Trajectory] = []
        self.applied: dict[str, None] = {}  # rule ids applied to some run, in order
        self.use = RuleUse()  # rule ids with a check made on some run, and those cut by --run-timeout
        self.degraded: list[Any] = []  # the diagnoses of runs whose rule evaluation ran out of time
        self.unknowns = Unknowns()  # the checks of rules that could not be evaluated (a warning names them)
        self.report: HtmlReport | MarkdownReport | None = None
        if report:
            self.report = (report_layer.MarkdownReport(title=title) if report.endswith((".md", ".markdown"))
                           else report_layer.HtmlReport(title=title))

    def add(self, i: int, r: AuditResult) -> None:
        """Take run ``i``'s result (``audit_paths``'s ``on_result``)."""
        d = r.diagnosis
        self.lines[i] = (ResumeJournal.tagged(d, self.key).to_json() if self.journal is None
                         else self.journal.append(d))
        # as long as a wide terminal can show (the summary cuts it to the column it gets)
        prev = r.trajectory.steps[d.critical_step].preview(PREVIEW_CHARS) if d.critical_step is not None else ""
        step = str(d.critical_step)
        if d.metadata.get("source_message", d.critical_step) != d.critical_step:  # a split Anthropic message
            step += f" (msg {d.metadata['source_message']})"
        if d.metadata.get("degraded"):
            self.degraded.append(d)
        self.rows[i] = (r.trajectory.id, step, d.agent or "—", d.category, d.confidence, d.basis or "—", prev)
        self.sources[i] = (r.trajectory.source.file or "", r.trajectory.source.record)
        self.applied.update(dict.fromkeys(r.rule_ids))
        if r.log is not None:
            self.use.add(r.log)
            self.unknowns.add(r.log)
        if FLAG_NON_UTF8 in r.trajectory.flags:
            self.flagged.append(r.trajectory)
        if self.keep_findings:  # SARIF / JUnit: the violations and the applied rules, not the log
            log = r.log if r.log is not None else ValidationLog(r.trajectory.id)
            self.findings[i] = report_layer.ci.RunFindings.of(log, r.trajectory.source.file,
                                                              r.trajectory.source.record)
        if self.report is not None:
            self.report.add(i, r)


_COLUMNS = (("run", "left"), ("step", "right"), ("agent", "left"), ("category", "left"), ("conf.", "right"),
            ("basis", "left"), ("preview", "left"))


#: the longest preview kept per run (the table cuts it to the width it has)
PREVIEW_CHARS = 240
#: the widest run id column (a longer id is cut with "…")
MAX_RUN = 40
#: the run id column is cut down to this before the preview is left out
SHORT_RUN = 16
#: below this width the preview column is left out (a few characters of it say nothing; the
#: diagnoses file and the report have the step)
MIN_PREVIEW = 16


def _fit_columns(rows: list[tuple[str, str, str, str, float, str, str]], width: int) -> list[int]:
    """Column widths of the summary table within ``width`` terminal cells (0: the column is left out).
    Texts are measured in cells (:func:`rich.cells.cell_len`): a CJK character takes two.

    The category column is as wide as the widest category shown (never cut). The run id and the
    preview share what is left: the run id whole up to :data:`MAX_RUN` characters while that leaves the
    preview :data:`MIN_PREVIEW`, else cut down to :data:`SHORT_RUN` for it; the preview up to its longest
    text (no padding to the edge), any room it leaves going back to a longer run id. With less than
    :data:`MIN_PREVIEW` characters left the preview is left out and its room goes back to the run id
    (up to :data:`MAX_RUN`). While the table is still too wide, the agent (down to 8) and the basis
    (down to 4: "fin…") give way; then the basis, the agent and the confidence are left out whole
    (rich would otherwise squeeze every column to a character or two); last the run id, the key to
    the diagnoses file (down to 6), and the category are cut."""
    from rich.cells import cell_len  # rich is loaded by the summary that calls this

    def longest(i: int, head: str) -> int:
        return max([cell_len(head)] + [cell_len(str(r[i])) for r in rows])

    whole_run, step, agent = longest(0, "run"), longest(1, "step"), min(longest(2, "agent"), 20)
    cat, conf, basis = longest(3, "category"), 5, longest(5, "basis")
    gap = 2  # SIMPLE_HEAD, no edge, collapsed padding: one padding and a blank rule between columns
    run, short = min(whole_run, MAX_RUN), min(whole_run, SHORT_RUN)
    room = width - gap * (len(_COLUMNS) - 1) - (step + agent + cat + conf + basis)  # for the run id and preview
    if room - short >= MIN_PREVIEW:
        run = min(run, room - MIN_PREVIEW)  # a long run id gives way to the preview first, down to SHORT_RUN
        preview = min(room - run, longest(6, "preview"))
        return [min(whole_run, room - preview), step, agent, cat, conf, basis, preview]
    run = max(short, min(run, room + gap))  # the preview's room (and its gap) back to the run id
    over = (run + step + agent + cat + conf + basis) + gap * (len(_COLUMNS) - 2) - width
    while over > 0 and (agent > 8 or basis > 4):
        if agent > 8:  # the agent first (down to 8), then the basis ("fin…", "weak", "fal…")
            agent -= 1
        else:
            basis -= 1
        over -= 1
    widths = [run, step, agent, cat, conf, basis, 0]
    for i in (5, 2, 4):  # still too wide: the basis, the agent, then conf. are left out whole
        if over <= 0:
            break
        over -= widths[i] + gap
        widths[i] = 0
    if over > 0:  # below ~45 columns: the run id (down to 6), then the category give way
        cut = min(over, max(run - 6, 0))
        widths[0] -= cut
        widths[3] = max(cat - (over - cut), 8)
    return widths


def _cut_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal cells in its middle (``a-very-lo…on-and-off``): run ids that
    differ only at their end (a number, a suffix) stay told apart when the column cuts them."""
    from rich.cells import cell_len

    if cell_len(text) <= width or width < 3:
        return text
    tail_cells = (width - 1) // 2
    head, tail = "", ""
    for ch in reversed(text):
        if cell_len(tail) + cell_len(ch) > tail_cells:
            break
        tail = ch + tail
    for ch in text:
        if cell_len(head) + cell_len(ch) > width - 1 - cell_len(tail):
            break
        head += ch
    return head + "…" + tail


def _run_labels(ids: list[str], sources: list[tuple[str, int | None]]) -> list[str]:
    """The run column's text per row: the run id, or — when rows of different inputs share the id
    (``audit A/10.json B/10.json``) — ``FILE:id`` for those rows, ``FILE`` the last parts of the path
    that tell the inputs apart (``A/10.json``), with ``[record]`` for a run of a multi-run file."""
    count = Counter(ids)
    labels = list(ids)
    for rid in (rid for rid, n in count.items() if n > 1):
        rows = [i for i, x in enumerate(ids) if x == rid]
        wheres = [(sources[i][0].replace("\\", "/").split("/"), sources[i][1]) for i in rows]
        depth = max(len(parts) for parts, _ in wheres)
        keep = next((k for k in range(1, depth + 1) if len({("/".join(p[-k:]), rec) for p, rec in wheres}) == len(rows)),
                    depth)
        for i, (parts, rec) in zip(rows, wheres, strict=True):
            labels[i] = "/".join(parts[-keep:]) + (f"[{rec}]" if rec is not None else "") + f":{rid}"
    return labels


def _warn_degraded(kept: _Kept) -> None:
    """The warnings (stderr, also with ``-q``) that runs ran out of rule-evaluation time, and that rules
    could not be evaluated on some runs (an evaluation error: the rule's defect, named), if any did:
    either way those runs' diagnoses rest on partial evidence. The outputs are not changed by them."""
    warn_degraded(kept.degraded)
    said = kept.unknowns.audit_warning(len(kept.rows))
    if said:
        warn_incomplete(said)


def _summary(kept: _Kept, skipped: int, output: str, report: str | None) -> None:
    from rich import box  # not with -q, which prints no summary
    from rich.table import Table

    out = console(err=True)
    if not kept.rows:
        if skipped:  # with neither, the caller said "no trace files found" or "no trajectory could be loaded"
            print_line(out, "no run could be audited")
        return
    rows = [kept.rows[i] for i in sorted(kept.rows)]
    labels = _run_labels([row[0] for row in rows], [kept.sources[i] for i in sorted(kept.rows)])
    # measured and cut as shown: the console prints a control character as \x07 (4 cells), so a cell
    # sized on the raw text was cut at its end by rich ("run\x07-with-bell…" for ids ending -0001, -0002)
    rows = [(terminal_safe(label), step, terminal_safe(agent), terminal_safe(category), conf, terminal_safe(basis),
             terminal_safe(prev)) for label, (_, step, agent, category, conf, basis, prev) in zip(labels, rows, strict=True)]
    table = Table(title=f"{len(rows)} run(s) audited, {skipped} skipped", title_justify="left", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True)
    shown = rows[:50]
    widths = _fit_columns(shown, out.width)
    keep = [i for i, w in enumerate(widths) if w]  # the preview is left out on a narrow terminal
    for i in keep:
        col, just = _COLUMNS[i]
        table.add_column(col, width=widths[i], no_wrap=True, overflow="ellipsis", justify=just)  # type: ignore[arg-type]
    for rid, step, agent, category, confidence, basis, prev in shown:
        cells = (_cut_middle(rid, widths[0]), step, agent, category, f"{confidence:.2f}", basis, " ".join(prev.split()))
        table.add_row(*(cells[i] for i in keep))
    if len(rows) > 50:
        table.add_row(*(("…", "", "", f"{len(rows) - 50} more", "", "", "")[i] for i in keep))
    out.print(table)
    cats = Counter(row[3] for row in rows)
    out.print(wrap_items("categories:", [f"{k} {v}" for k, v in cats.most_common()], display_width(out) or sys.maxsize),
              highlight=False, markup=False, soft_wrap=True)
    say_never_fired(kept.use.never_fired(kept.applied), len(rows), not_evaluated=kept.use.not_evaluated(kept.applied))
    _warn_degraded(kept)
    where = [f"{'diagnoses' if output.endswith('.jsonl') else 'results'} → {output}"] + ([f"report → {report}"] if report else [])
    print_line(out, "; ".join(where))
