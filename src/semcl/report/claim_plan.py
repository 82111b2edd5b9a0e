"""`semcl claims --plan`: what each undecided claim needs to be decided, and what buying it costs.

A claim is undecided for lack of runs when a side has no finished run ("missing runs") or fewer than two seeds
("inconclusive (n < 2)"). It needs every run of the rows it reads (a derived row: the rows of its pairs; a
`select` row: every row of the table it picks from; bases such as pre-training or teacher runs come with them)
on the seeds a test needs: the table's own seeds of the profile when it lists two or more, else the three
`--seeds 3` gives (semcl.registry.seeds; HSA's and other one-seed tables stay one seed by default, their cost at
paper scale being what it is). Costs are `semcl plan`'s: each run's estimate (semcl.estimate.cost), a training
that several runs share (same training key) or that the store holds already paid once, then evaluation alone.
A claim that runs cannot decide (table not registered, row not implemented, column not measured) says why.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from semcl.estimate.cost import estimate_cost, evaluation_cost
from semcl.registry.plan import Run, plan_runs
from semcl.registry.seeds import with_seeds
from semcl.registry.tables import Table
from semcl.report.claim_seeds import TEST_SEEDS, seeds_needed, seeds_text
from semcl.report.claim_stats import INCONCLUSIVE_FEW
from semcl.report.claim_verdicts import MISSING, NOT_MEASURED, Verdict
from semcl.report.claims import Claim, ClaimsFile
from semcl.store import Store

UNDECIDED = (MISSING, INCONCLUSIVE_FEW, NOT_MEASURED)


def unit_of(profile: str) -> str:
    return "GPU-h" if profile == "paper" else "CPU-min"


def rows_read(claim: Claim, table: Table) -> dict[str, list[str]]:
    """{table id: row labels} whose runs decide the claim, in table order."""
    out: dict[str, list[str]] = {}
    for label in (claim.a, claim.b):
        if label is None:
            continue
        row = table.row(label)
        if row.select:  # the best row of another table: all of its rows compete
            linked = table.linked[row.select.table]
            out.setdefault(linked.id, []).extend(r.label for r in linked.rows if r.implemented and not r.derived
                                                 and not r.select and not r.reference)
        elif row.derived:
            out.setdefault(table.id, []).extend(x for pair in row.derived for x in pair)
        elif not row.reference:
            out.setdefault(table.id, []).append(label)
    return {tid: list(dict.fromkeys(labels)) for tid, labels in out.items()}


class Bill:
    """Runs and their cost, as `semcl plan` bills them: each run once; a training key's first run (or the store's
    holder of it) pays training, every other run of the key its evaluation alone."""

    def __init__(self, store: Store) -> None:
        self.store, self.runs, self.trainers, self.cost = store, set(), {}, 0.0

    def add(self, run: Run, cost: str, eval_cost: str) -> None:
        if run.run_id in self.runs:
            return
        self.runs.add(run.run_id)
        if run.train_key not in self.trainers:
            held = self.store.trainer_of(run.train_key)
            self.trainers[run.train_key] = held if held is not None and self.store.trained(held) else run.run_id
        full, alone = float(cost.split()[0]), float(eval_cost.split()[0])
        self.cost += full if self.trainers[run.train_key] == run.run_id else min(alone, full)


@dataclass(frozen=True)
class Need:
    claim: Claim
    verdict: str
    reason: str = ""  # why runs cannot decide it ("" when they can)
    rows: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (table id, row labels)
    seeds: tuple[int, ...] = ()
    beyond: bool = False  # the seeds go past the registered ones
    todo: tuple[Run, ...] = ()  # runs not done, bases included
    cost: float = 0.0  # of `todo`, in unit_of(profile)
    planned: int = 0  # runs the claim reads, done or not


class Planner:
    """Plans the runs of tables at the seeds claims need, once per (table, seeds), with their cost strings."""

    def __init__(self, profile: str, store: Store) -> None:
        self.profile, self.store = profile, store
        self._runs: dict[tuple, list[Run]] = {}
        self._costs: dict[str, tuple[str, str]] = {}
        self._status: dict[str, str] = {}

    def runs(self, table: Table, seeds: list[int], rows: list[str]) -> list[Run]:
        key = (table.id, tuple(seeds), tuple(rows))
        if key not in self._runs:
            self._runs[key] = plan_runs(with_seeds(table, self.profile, list(seeds)), self.profile, rows=rows)
            gpus = {r.label: table.resources_for(r.label, self.profile).gpus for r in table.rows}
            for run in self._runs[key]:
                if run.run_id not in self._costs:
                    self._costs[run.run_id] = (estimate_cost(run.config, self.profile, gpus[run.row_label]),
                                               evaluation_cost(run.config, self.profile, gpus[run.row_label]))
        return self._runs[key]

    def costs(self, run: Run) -> tuple[str, str]:
        return self._costs[run.run_id]

    def done(self, run: Run) -> bool:
        if run.run_id not in self._status:
            self._status[run.run_id] = self.store.status(run.run_id)[0]
        return self._status[run.run_id] == "done"


def plan_claims(cf: ClaimsFile, verdicts: list[Verdict], profile: str, store: Store, registry: dict[str, Table],
                wanted: int | list[int] | None = None) -> tuple[list[Need], Bill, Bill]:
    """The need of every undecided claim (in file order), the bill of buying them all (each run and each training
    once) and its part on seeds the tables do not register."""
    planner, total, beyond_bill, out = Planner(profile, store), Bill(store), Bill(store), []
    for v in verdicts:
        if v.verdict not in UNDECIDED:
            continue
        c, table = v.claim, registry.get(v.claim.table)
        if v.verdict == NOT_MEASURED or table is None or profile not in table.profiles or (
                v.verdict == MISSING and v.detail.startswith("row ")):
            out.append(Need(c, v.verdict, reason=v.detail))
            continue
        seeds, beyond = seeds_needed(table, profile, wanted)
        rows, todo, bill, n = [], [], Bill(store), 0
        for tid, labels in rows_read(c, table).items():
            t = table if tid == table.id else table.linked[tid]
            runs = planner.runs(t, seeds, labels)
            rows.append((tid, tuple(labels)))
            n += len(runs)
            for run in runs:
                if not planner.done(run):
                    todo.append(run)
                    bill.add(run, *planner.costs(run))
                    total.add(run, *planner.costs(run))
                    if run.seed not in t.seeds_for(profile):
                        beyond_bill.add(run, *planner.costs(run))
        out.append(Need(c, v.verdict, "", tuple(rows), tuple(seeds), beyond, tuple(todo), bill.cost, n))
    return out, total, beyond_bill


def amount(x: float) -> str:
    """A cost as `semcl plan` shows it (4 significant digits), thousands with separators instead of exponents."""
    return f"{x:,.0f}" if x >= 10_000 else f"{x:.4g}"


def run_command(tid: str, rows: list[str], seeds: tuple[int, ...], beyond: bool, profile: str) -> str:
    """The `semcl run` line that buys these rows at these seeds (--seeds only where they go past the registered)."""
    sel = " ".join(f"--row {shlex.quote(r)}" for r in rows)
    more = f" --seeds {','.join(map(str, seeds))}" if beyond else ""
    return f"semcl run {tid} {sel} --profile {profile}{more}"


def render_plan(cf: ClaimsFile, profile: str, needs: list[Need], total: Bill, unregistered: Bill,
                registry: dict[str, Table], wanted: int | list[int] | None = None) -> str:
    unit = unit_of(profile)
    judged = f"--seeds {wanted if isinstance(wanted, int) else seeds_text(wanted)}" if wanted else "seeds as registered"
    lines = [f"# claims of {cf.paper}, profile {profile} ({judged}): {len(needs)} of {len(cf.claims)} undecided"]
    commands: dict[tuple, list[str]] = {}
    for need in needs:
        c = need.claim
        lines.append(f"`{c.id}` ({need.verdict}): {c.describe()}")
        if need.reason:
            lines.append(f"  runs cannot decide it: {need.reason}")
            continue
        own = registry[c.table].seeds_for(profile)
        why = ""
        if need.beyond and wanted is None:
            why = (f" (the table registers seed{'s' if len(own) > 1 else ''} {seeds_text(own)} only: decidable with "
                   f"--seeds {TEST_SEEDS})")
        for tid, labels in need.rows:
            shown = ", ".join(labels) if len(labels) <= 4 else f"{len(labels)} rows ({labels[0]}, ...)"
            lines.append(f"  needs {tid} {shown} x seeds {seeds_text(need.seeds)}{why}")
            commands.setdefault((tid, need.seeds, need.beyond), []).extend(labels)
        extra = [r for r in need.todo if r.seed not in registry[c.table].seeds_for(profile)]
        past = f" (on seeds beyond the registered: {len(extra)} runs)" if need.beyond and extra else ""
        lines.append(f"  missing: {len(need.todo)} of {need.planned} runs (bases included), {amount(need.cost)} {unit}"
                     + past)
    buyable = [n for n in needs if not n.reason]
    more = (f"; of which on seeds the tables do not register: {len(unregistered.runs)} runs, "
            f"+{amount(unregistered.cost)} {unit}" if unregistered.runs else "")
    lines.append(f"# buying all {len(buyable)} claims runs can decide: {len(total.runs)} runs, {amount(total.cost)} "
                 f"{unit} (each run and each training once; estimates: semcl.estimate){more}")
    never = [n.claim.id for n in needs if n.reason]
    if never:
        lines.append(f"# not decidable by runs of this suite: {', '.join(never)}")
    for (tid, seeds, beyond), labels in commands.items():
        lines.append("#   " + run_command(tid, list(dict.fromkeys(labels)), seeds, beyond, profile))
    return "\n".join(lines) + "\n"


def claims_plan(name: str, profile: str, store: Store, wanted: int | list[int] | None = None) -> str:
    """`semcl claims <paper | table> --plan`: the plan of the paper's undecided claims (a table id: its claims
    only), judged from `store` at the registered seeds (or --seeds)."""
    from semcl.registry.tables import load_registry, unknown_table
    from semcl.report.claim_verdicts import judge_claims
    from semcl.report.claims import load_claims

    paper = name.split("/", 1)[0]
    cf = load_claims(paper)
    registry = load_registry()
    if "/" in name:
        if name not in registry and name not in cf.unregistered:
            raise unknown_table(name, registry)
        mine = tuple(c for c in cf.claims if c.table == name)
        if not mine:
            from semcl.errors import ConfigError

            raise ConfigError(f"{cf.path}: no claim reads table {name} (tables with claims: "
                              f"{', '.join(dict.fromkeys(c.table for c in cf.claims))})")
        cf = replace(cf, claims=mine)
    judged = registry if wanted is None else {tid: with_seeds(t, profile, wanted) for tid, t in registry.items()}
    verdicts = judge_claims(cf, profile, store, judged)
    # seeds and runs are planned from the registered tables, so seeds past theirs are named as such
    needs, total, beyond = plan_claims(cf, verdicts, profile, store, registry, wanted)
    return render_plan(cf, profile, needs, total, beyond, registry, wanted)
