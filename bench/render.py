"""Renders BENCHMARKS.md from bench/run.sh's results.tsv and the registryload JSON reports."""
import datetime
import json
import os
import platform
import re
import subprocess
import sys

results_path, reports = sys.argv[1], sys.argv[2]
rows, memory, restarts, sweep, phase_steal, machine, server_cpu, probe = [], [], [], [], {}, None, {}, None
idle_move = None
rested = None
stalls = None
floors = []
binding_memory = []
vendor_move = None
feed_table = None
gaps = None
fault_in = None
sized_devices = None
spares = None
settle_seconds = None
ticks_per_second = os.sysconf("SC_CLK_TCK")
for line in open(results_path):
    fields = line.rstrip("\n").split("\t")
    if fields[0] == "memory":
        # Older results have no settling time.
        memory.append((int(fields[1]), int(fields[2]), int(fields[3]) if len(fields) > 3 else None))
    elif fields[0] == "idlemove":
        idle_move = dict(devices=int(fields[1]), files=int(fields[2]), left=int(fields[3]), seconds=float(fields[4]),
                         cpu=float(fields[5]), restart=float(fields[6]), moved=float(fields[7]) if fields[7] else None)
    elif fields[0] == "restart":
        restarts.append((int(fields[1]), float(fields[2]), float(fields[3]) if len(fields) > 3 and fields[3] else None))
    elif fields[0] == "steal":
        phase_steal[fields[1]] = float(fields[2])
    elif fields[0] == "machine":
        machine = dict(zip(("fsync_p50", "fsync_p99", "fsync_cpu", "wake"), map(float, fields[1:5])))
    elif fields[0] == "rested":
        rested = dict(zip(("hot_p50", "hot_p99", "rested_p50", "rested_p99", "rest_ms"), map(float, fields[1:6])))
    elif fields[0] == "stalls":
        stalls = dict(zip(("seconds", "count", "ms", "longest_ms"), map(float, fields[1:5])))
    elif fields[0] == "fault-in":
        fault_in = dict(zip(("fresh", "reused"), map(float, fields[1:3])))
    elif fields[0] == "gaps":
        gaps = dict(zip(("cores", "seconds", "per_second", "lost_ms", "longest_ms", "damon_ms"), map(float, fields[1:7])))
    elif fields[0] == "probe":
        probe = dict(zip(("p50", "p99", "max", "calls"), map(float, fields[1:5])))
    elif fields[0] == "servercpu":
        ticks, operations = int(fields[2]), int(fields[3])
        if operations > 0:
            server_cpu[fields[1]] = ticks / ticks_per_second / operations * 1e6
    elif fields[0] == "sized":
        sized_devices = int(fields[1])
    elif fields[0] == "spares":
        spares = {"kept": int(fields[1]), "seconds": int(fields[2]), "left": int(fields[3])}
    elif fields[0] == "settle":
        settle_seconds = int(fields[1])
    elif fields[0] == "floor":
        # Older results have no commit field before the command.
        mode, work, frames, p50, p90, p99, p999, peak, busy, stolen, *commit, command = fields[1:]
        floors.append(dict(mode=mode, work=int(work), frames=int(frames), p50=float(p50), p90=float(p90), p99=float(p99),
                           p999=float(p999), max=float(peak), busy=float(busy), steal=float(stolen),
                           commit_p99=float(commit[0]) if commit and commit[0] else None, command=command))
    elif fields[0] == "vendormove":
        vendor_move = json.loads(fields[1])
    elif fields[0] == "feed":
        feed_table = open(fields[1]).read()
    elif fields[0] == "bindingmemory":
        binding_memory = json.loads(fields[1])
    elif fields[0] == "sweep":
        sweep.append((int(fields[1]), int(fields[2]), fields[3]))
    else:
        kind, name, rate, p50, p99, command, *key = fields
        rows.append(dict(kind=kind, name=name, rate=float(rate), p50=float(p50), p99=float(p99), command=command,
                         key=key[0] if key else None))


def report(key):
    path = os.path.join(reports, key + ".json")
    return json.load(open(path)) if os.path.exists(path) else None


def first(kind, contains=""):
    return next((r for r in rows if r["kind"] == kind and contains in r["name"]), None)


def devices_after(found):
    """The node's device count when the run ended, from the server stats the report embeds."""
    servers = found.get("servers") or []
    return f"{servers[0]['devices'] / 1e6:.1f}M" if servers and "devices" in servers[0] else ""


def journal_waiting(found):
    """The journal files the node kept when the run ended (the one being written
    included), from the server stats the report embeds."""
    servers = found.get("servers") or []
    return f"{servers[0]['journal_files']}" if servers and servers[0].get("journal_files") is not None else ""


def commit_window(found):
    """The node's own commit times (journal write + fdatasync) over the run's window, or None."""
    servers = found.get("servers") or []
    return servers[0].get("window_commit_latency") if servers else None


def commit_p99(found):
    """The node's commit time at p99 over the run's window (a bucket's bound), as text."""
    window = commit_window(found)
    return "≤ " + ms(window["p99_ns"] / 1000) if window else ""


def commit_max(found):
    """The node's longest commit in the run's window (a bucket's bound), as text: disk stalls too rare for p99."""
    window = commit_window(found)
    return "≤ " + ms(window["max_ns"] / 1000) if window and "max_ns" in window else ""


def per_second(found):
    """The median and the worst of the run's per-second p99s, and how many seconds were over 2 ms, as text."""
    seconds = found.get("per_second")
    if not seconds or seconds.get("median_p99_ns") is None:
        return ""
    over = sum(1 for second in seconds["seconds"] if second["p99_ns"] > 2_000_000)
    return (f"{ms(seconds['median_p99_ns'] / 1000)} / {ms(seconds['worst_p99_ns'] / 1000)} "
            f"({over} of {len(seconds['seconds'])})")


def ms(micros):
    return f"{micros / 1000:.2f} ms"


def percent(share):
    return "?" if share is None else f"{share * 100:.0f}%"


def steal(row):
    """The hypervisor's share of CPU time during a row's run (the whole phase for baselines)."""
    if row["key"]:
        found = report(row["key"])
        return (found or {}).get("cpu", {}).get("steal_share")
    return phase_steal.get("baselines")


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


# The revision the registryload reports recorded (the code measured), else the checkout's.
measured = report("batch") or {}
revision = (measured.get("git_revision") or "")[:7] or subprocess.run(
    ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
memory_gib = int(open("/proc/meminfo").readline().split()[1]) / 1024 / 1024
postgres, redis, redis_always = first("postgres"), first("redis", "everysec"), first("redis", "always")
single, batch = first("registry", "single RegisterRequests"), first("registry", "batches of 100")
coalesced = first("registry", "coalesced")
verified, floor = report("verify"), report("floor")
def numbered_runs(prefix):
    """The reports of a run repeated as PREFIX, PREFIX-2, ... (or PREFIX-1, PREFIX-2, ...), in order."""
    keys = sorted((name[:-len(".json")] for name in os.listdir(reports) if re.fullmatch(prefix + r"(-\d+)?\.json", name)),
                  key=lambda key: int(key.rpartition("-")[2] if key != prefix else 1))
    return [(key, report(key)) for key in keys]


def median_by_p99(runs):
    """The run with the median p99, or None."""
    return sorted((found for _, found in runs), key=lambda found: found["latency"]["p99_ns"])[len(runs) // 2] if runs else None


# The open loop at 70% was run several times ("open", "open-2", ...); the target is judged on the
# run with the median p99, and every run is listed.
open_runs = numbered_runs("open")
opened = median_by_p99(open_runs)
probed = report("open-probe")
# The same open loop on a node started with --expected-devices (step 3 of bench/run.sh).
sized_runs = numbered_runs("sized")
sized = median_by_p99(sized_runs)
# And on a fresh sized node keeping spare journal files for its runs (--journal-spares).
spared_runs = numbered_runs("spared")
spared = median_by_p99(spared_runs)

out = []
w = out.append
# The parts are written apart and assembled at the end: the summary and the targets first, the
# machine's own characteristics in an appendix.
machine_part, body, targets_part, commands_part = [], [], [], []
w("# Benchmarks\n")
w(f"Generated by `make bench` (`bench/run.sh`) on {datetime.date.today().isoformat()} at revision `{revision}`.")
w(f"Machine: {os.cpu_count()} cores ({cpu_model()}), {memory_gib:.0f} GiB, Linux {platform.release()}, ext4 on a virtual disk.")
w("Every server and its load generator share the same 2 cores, so the generator's CPU is taken from the server;")
w("the baselines were measured in the same run, and the ratios are what to compare across machines.\n")
w("Workload: first installs (a new keychain UUID and IDFV each time), durable acknowledgements everywhere")
w("(registryd and PostgreSQL acknowledge after fsync; Redis with `appendfsync everysec` acknowledges before it).\n")
w = machine_part.append
if machine:
    w("## Appendix: what this machine charges\n")
    w(f"Measured by `bench/machine.py` at the start of the run (from Python, so each figure includes a microsecond")
    w(f"or two of interpreter): an `fdatasync` after a 20 KB append, which every group commit does, takes")
    w(f"{machine['fsync_p50']:.0f} µs at p50 and {machine['fsync_p99']:.0f} µs at p99 and costs {machine['fsync_cpu']:.0f} µs of CPU")
    w(f"(the virtual disk's exits included); waking a sleeping process takes {machine['wake']:.1f} µs. A request crosses")
    w("threads several times (generator → event loop → log writer → event loop → generator), so at low rates")
    w("these costs, rather than the registry's own work (see the server CPU per operation of the batched run")
    w("below), make up most of each request's CPU and latency.\n")
if rested:
    alone_ms = floor["latency"]["p50_ns"] / 1e6 if floor else None
    w("The disk answers faster while it is kept busy: writing 15 KB over blocks a file already has (as a commit into")
    w(f"a spare journal file does) and calling `fdatasync` took {rested['hot_p50']:.0f} µs at p50 ({rested['hot_p99']:.0f} µs at p99)")
    w(f"back to back, and {rested['rested_p50']:.0f} µs ({rested['rested_p99']:.0f} µs) when each call came {rested['rest_ms']:g} ms after the last.")
    w("The rest costs the same whether the CPU waits or spins meanwhile, and its cost is not the guest's I/O scheduler")
    w("(tried with `none`), so it lies below the guest. A node at a low rate, whose every commit finds the disk rested,")
    w("therefore waits several times longer for each commit than a busy node does"
      + (f": the rested `fdatasync` alone is {rested['rested_p50'] / 1000 / alone_ms:.0%} of a lone batch's"
         f" {alone_ms:.2f} ms at 5,000/s (below)" if alone_ms else "")
      + ". Keeping the disk busy with extra `fdatasync`s on a side file (a separate process, one every 200 µs) did not")
    w("pay here: the node's commits got no faster, and the extra wake-ups made the generator late (p99 12-14 ms against")
    w("2.2-3.3 ms at 470,000 registrations/s, two runs each by hand).\n")
if stalls:
    w(f"Left alone, the disk also stalls: writing and syncing 15 KB every 0.3 ms for {stalls['seconds']:.0f} s with nothing else")
    w(f"running, {stalls['count']:.0f} calls took over 4 ms, {stalls['ms']:.1f} ms in all, the longest {stalls['longest_ms']:.1f} ms. By hand, two")
    w("writers syncing separate files stalled at the same instants, so the stalls are the disk's and a second commit stream")
    w("would not get around them. Each one holds every group commit behind it, and every registration that arrives meanwhile"
      + (f" waits for its end: at the open loop's {opened['throughput']['achieved_per_second']:,.0f} registrations/s, 10 ms of"
         f" stall makes about {opened['throughput']['achieved_per_second'] / 100:,.0f} of them late.\n"
         if opened else " waits for its end.\n"))
if gaps:
    w(f"The machine also takes CPUs away: a process that never sleeps, pinned to each of the {gaps['cores']:.0f} cores for")
    w(f"{gaps['seconds']:.0f} s with nothing else running, found its clock jump by more than 1 ms {gaps['per_second']:.2f} times a")
    w(f"second per core, losing {gaps['lost_ms']:.2f} ms a second per core, at most {gaps['longest_ms']:.2f} ms at once: time taken")
    w("by the hypervisor or by the kernel's own threads"
      + (f" (here `kdamond`, the kernel's memory monitor, samples every {gaps['damon_ms']:g} ms for reclaim; switched off"
         " for a test, the gaps barely changed, so they are mostly the hypervisor's)" if gaps.get("damon_ms") else "")
      + ".")
    w("Whatever runs then waits that long, and a p99 is decided by 1% of the requests, so at high")
    w("load a few such gaps a second are enough to move it by milliseconds.\n")
if fault_in:
    # Both indexes' next tables at the doubling at 25.2M devices: 2^26 device-ID buckets and 2^27
    # claim buckets, 24 bytes each.
    next_tables_bytes = (2**26 + 2**27) * 24
    w(f"New memory is dear here: having the kernel provide a GiB of anonymous memory on huge pages took {fault_in['fresh']:.2f} s")
    w(f"of CPU when the pages were new to the process, against {fault_in['reused']:.2f} s for pages it had just freed. This VM")
    w("reports freed memory to the hypervisor within seconds (free page reporting), and a page the hypervisor took back")
    w("costs a fault in the host as well when it is used again. A growing index pays this for every next table: at the")
    w(f"doubling at 25.2M devices both indexes' next tables are {next_tables_bytes / 1e9:.1f} GB, about"
      f" {next_tables_bytes / 2**30 * fault_in['fresh']:.0f} s of CPU here, and about"
      f" {next_tables_bytes / 2**30 * fault_in['reused']:.1f} s where memory is not handed back.\n")
w = body.append
w("## Throughput and latency\n")
w("| System | registrations/s | p50 | p99 | CPU steal | server CPU per operation |")
w("|---|---:|---:|---:|---:|---:|")
for r in rows:
    cpu = server_cpu.get(r["key"])
    w(f"| {r['name']} | {r['rate']:,.0f} | {ms(r['p50'])} | {ms(r['p99'])} | {percent(steal(r))} | "
      f"{'' if cpu is None else f'{cpu:.1f} µs'} |")
w("")
w("Server CPU per operation is registryd's user and system time over the whole registryload run (warm-up")
w("included, and for --verify its lookups) divided by the operations it logged meanwhile: the server's cost")
w("of a registration, less sensitive to a noisy machine than latency is.\n")
w("CPU steal is the share of the machine's CPU time that the hypervisor gave to other guests during the run")
w("(from `/proc/stat`; for the baselines, over the whole baseline phase). While it is high, a runnable thread")
w("can wait milliseconds for a CPU, and that wait lands in the latency tail of whatever is measured.\n")
w("Ratios (registrations/s):\n")
for label, ours in (("batches of 100", batch), ("single requests", single), ("single registrations coalesced by the client", coalesced)):
    if ours and redis and postgres:
        w(f"- registryd, {label}: **{ours['rate'] / redis['rate']:.1f}×** Redis (everysec), "
          f"{ours['rate'] / redis_always['rate']:.1f}× Redis (always), **{ours['rate'] / postgres['rate']:.1f}×** PostgreSQL.")
w("")
w("## Memory and restart\n")
w("| Registered devices | Resident memory | Bytes per device |")
w("|---:|---:|---:|")
for devices, rss, _ in memory:
    w(f"| {devices:,} | {rss / 1024 / 1024:,.0f} MiB | {rss / devices:.0f} |")
w("\nA point shortly after an index doubled also holds the old table while its entries move to the new one,")
w("about six buckets per insert (a move lasts about a sixth as many inserts as the old table has buckets), and then while")
w("the node gives it back to the kernel 16 MiB a second (see docs/architecture.md): the peak is old and new tables together.")
w("Where the doublings land depends on the sizes the node started from: it restarts after each point, sized for the")
w("snapshot it loads, and the next point's doublings start from there, so the same count can fall before a doubling in one revision and")
w("during its move in another.")
settling = [(devices, seconds) for devices, _, seconds in memory if seconds is not None]
if settling:
    w("Each point was read once the resident memory had stopped falling: "
      + ", ".join(f"{seconds} s after the load at {devices:,}" for devices, seconds in settling) + ".")
if binding_memory:
    w("\nMemory a binding takes in the state (`bench/BindingMemory`: resident memory gained while that many binding changes,")
    w("each a new account's first bind, are applied to a `RegistryState`), against the floor measured in the same run: the same")
    w("changes as one flat array of packed records (account, device, time, interned vendor and origin, kind), before any index.\n")
    w("The longest single change applied is when the two binding indexes grow: they rehash every entry at once.\n")
    w("| Binding changes | Bytes per binding | Floor (packed records) | Longest apply |")
    w("|---:|---:|---:|---:|")
    for point in binding_memory:
        longest = f"{point['longest_apply_ms']:.1f} ms" if "longest_apply_ms" in point else "not measured"
        w(f"| {point['bindings']:,} | {point['state_bytes_per_binding']:.0f} | {point['floor_bytes_per_binding']:.0f} | {longest} |")
if vendor_move:
    v = vendor_move
    w(f"\nThe pause of a vendor move (`bench/VendorMove`): applying one rule change whose move joins a vendor of "
      f"{v['devices'] // 2:,} devices to another of as many ({v['claims']:,} claims, {v['bindings']:,} binding changes; "
      f"{v['merged']:,} devices merged) held the state for **{v['pause_ms']:.0f} ms**. The floor, measured in the same run, is "
      f"{v['floor_ms']:.0f} ms: every claim key read once and each moved one written into a fresh table, with no digest or index "
      "upkeep. Every node pauses so once, when the move reaches it.")
if feed_table:
    # bench/feed.sh writes the whole section, heading included (make bench-feed puts it in alone).
    w("\n<!-- feed:begin -->")
    w(feed_table.rstrip())
    w("<!-- feed:end -->")
for devices, seconds, moved in restarts:
    w(f"\nRestart with {devices:,} devices: {seconds:.1f} s until the node accepts connections"
      + (f", of which {moved:.1f} s loaded the snapshot the clean stop took and replayed the journal past it."
         if moved is not None else " (loading the snapshot the clean stop took, then replaying the journal past it)."))
if idle_move:
    m = idle_move
    w(f"\nThe same restart after the node had time to move its journal while idle: a fresh node, {m['devices']:,} devices in "
      f"batches of 100, then a wait until the node had moved its finished journal files into SQLite. It moved {m['files']} files "
      f"in {m['seconds']:.1f} s after the load stopped, using {m['cpu']:.1f} s of CPU (at `SCHED_IDLE` priority, with rests "
      f"three times as long as each step, see docs/operations.md), and {m['left']} file{'' if m['left'] == 1 else 's'} "
      f"(the one being written) {'was' if m['left'] == 1 else 'were'} left. It then restarted in **{m['restart']:.1f} s**"
      + (f", of which {m['moved']:.1f} s moved that last file." if m['moved'] is not None else "."))
w("")
def open_loop_table(runs):
    """One row per open-loop run: (label, report) pairs."""
    w("| Run | Achieved/s | p50 | p99 | p99 per second: median / worst (seconds over 2 ms) | p99.9 | node's commit p99 | node's commit max | generator lag p99 | machine busy | CPU steal | node's devices after |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, found in runs:
        lat, lag, cpu = found["latency"], found["scheduler_lag"], found.get("cpu", {})
        w(f"| {label} | {found['throughput']['achieved_per_second']:,.0f} | {ms(lat['p50_ns'] / 1000)} | "
          f"{ms(lat['p99_ns'] / 1000)} | {per_second(found)} | {ms(lat['p99_9_ns'] / 1000)} | {commit_p99(found)} | {commit_max(found)} | "
          f"{ms(lag['p99_ns'] / 1000)} | {percent(cpu.get('busy_share'))} | {percent(cpu.get('steal_share'))} | {devices_after(found)} |")
    w("")


if open_runs:
    w("## Open loop at 70% of the maximum, run by run\n")
    w("The same open-loop run as in the table above, repeated on the same node with new devices each time; one")
    w("run's tail depends on what the hypervisor does meanwhile. The target below is judged on the median p99.")
    w("The last row ran beside the disk probe (below), so it is not one of the repeats. The node's size after each")
    w("run matters: both indexes double at about 3.1M, 6.3M, 12.6M and 25.2M devices, each switch waits for the next")
    w("table's pages to be populated in the background (new memory, dear on this VM: see the appendix), and for about a quarter as many devices again every insert also")
    w("moves about six old buckets, and a lookup of a key the move has not passed yet also looks in the old table.\n")
    open_loop_table(open_runs + ([("beside the probe", probed)] if probed else []))
    w("The node's commit p99 and max are its own measure of its group commits during the run (the journal's write and")
    w("`fdatasync`, which every registration waits for at least once; a bucket's upper bound, see docs/load-testing.md). The max")
    w("shows the disk's rare stalls: a few commits in a row that take milliseconds each hold every registration meanwhile.")
    w("The p99 per second is each progress interval's own p99 (about a second each, after the warm-up): its median is")
    w("what an ordinary second looked like, its worst how bad the stalls were; the run's p99 mixes the two.\n")
    if sized_runs:
        w(f"The same open loop on a fresh node started with `--expected-devices {sized_devices:,}`, whose indexes are sized")
        w("for that many devices at start-up and so neither grow nor move entries during these runs."
          + (f" It started {settle_seconds} s after the previous node (tens of millions of devices) stopped, because this VM"
             " reports freed memory to the hypervisor in the background (free page reporting is on), and a run started"
             " within seconds of the stop stalled for hundreds of milliseconds." if settle_seconds else "")
          + " It waited for its indexes' pages to be populated before the first run:\n")
        open_loop_table(sized_runs)
    if spared_runs and spares:
        w(f"The same open loop on another fresh node sized the same way that also keeps `--journal-spares {spares['kept']}`:")
        w("spare journal files whose blocks are already written, which a rotation writes over. The nodes above keep one, so")
        w("each file they fill (about one a second at this rate) makes them write the next spare's zeros while they serve,")
        w("as many bytes as the journal itself, and every commit's `fdatasync` waits behind them. This node made its spares")
        w(f"while quiet before the runs (in {spares['seconds']} s)"
          + (f", enough for all of them, so it wrote no zeros during the runs; {spares['left']} were left after the last."
             if spares["left"] > 0 else ", but none was left after the last run, so that run may have written zeros near its end.")
          + " A node serving longer at this rate than its spares last writes zeros again, like the nodes above:\n")
        open_loop_table(spared_runs)
    if probe:
        w("The disk probe: during that last run, a separate process appended 20 KB and called `fdatasync` once a")
        w(f"millisecond ({probe['calls']:,.0f} calls, at real-time priority where allowed, so that it waited for the disk")
        w(f"rather than for a CPU). Its `fdatasync` took {probe['p50']:.0f} µs at p50, {probe['p99']:.0f} µs at p99 and")
        w(f"{probe['max'] / 1000:.1f} ms at most" + (f", against {machine['fsync_p50']:.0f} µs and {machine['fsync_p99']:.0f} µs on the idle machine"
          if machine else "") + ": what the disk alone adds to a group commit while the node writes its journal")
        w("(registryd writes nothing else while it is this busy, but for a snapshot, which none of these runs took).\n")
if sweep:
    w("## Latency against load\n")
    w("Open loop, latency from the intended send time: single RegisterRequests over 4 connections, then batches")
    w("of 20 over 8. The generator lag is how late the generator itself sent; it is part of every latency below")
    w("and is not the server's. The busy share is the whole machine's (server, generator and kernel).")
    w("These runs follow the open loops on the node sized for its devices (above), on that node: its indexes never")
    w("grow meanwhile, and its journal then held those runs' registrations. The column before the last is how many")
    w("journal files the node kept when the run ended (what its snapshots did not yet cover).\n")
    w("| Batch | Intended/s | Achieved/s | p50 | p99 | p99.9 | node's commit p99 | generator lag p99 | busy | CPU steal | node's devices after | journal files waiting after | p99 ≤ 2 ms |")
    w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    best = {}
    for size, rate, _ in sweep:
        found = report(f"sweep-{size}-{rate}")
        if not found:
            continue
        lat, lag, cpu = found["latency"], found["scheduler_lag"], found.get("cpu", {})
        met = lat["p99_ns"] <= 2_000_000
        if met:
            best[size] = max(best.get(size, 0), rate)
        w(f"| {size} | {rate:,} | {found['throughput']['achieved_per_second']:,.0f} | {ms(lat['p50_ns'] / 1000)} | "
          f"{ms(lat['p99_ns'] / 1000)} | {ms(lat['p99_9_ns'] / 1000)} | {commit_p99(found)} | {ms(lag['p99_ns'] / 1000)} | "
          f"{percent(cpu.get('busy_share'))} | {percent(cpu.get('steal_share'))} | {devices_after(found)} | "
          f"{journal_waiting(found)} | {'yes' if met else 'no'} |")
    w("")
    sizes = sorted({size for size, _, _ in sweep})
    w("The highest swept rate with p99 ≤ 2 ms: " + "; ".join(
        (f"{best[size]:,}/s" if size in best else "none") + (" with single requests" if size == 1 else f" with batches of {size}")
        for size in sizes) + ".\n")
in_memory = report("memory-dir")
# The most CPU per registration with which some mode of the floor met 2 ms at its median p99 (None if none did).
floor_allows = None
if floors or in_memory:
    w("## What this machine allows\n")
    w("The open loop at 70% again, at the same frames per second, against servers that do less than registryd.")
    w("`bench/floor.c` is no registry: its reading thread reads each ready connection's frames and spins a set CPU")
    w("time per registration (standing in for decoding and deciding); each round of frames is then journaled with one")
    w("`pwrite` and one `fdatasync` (group commit) and answered, by the reading thread itself (inline: nothing crosses")
    w("threads) or by one committer thread while the next round is read (pipelined: one hand-over per round). Its own")
    w("C client sends at the same frames per second over 8 connections, frames and answers of registryd's sizes for a")
    w("batch of 100, and measures from each frame's intended send time, as registryload does. Each row shows what p99")
    w("this machine allows at this rate if a request path cost that much CPU per registration and nothing else ran,")
    w("with a generator cheaper than registryload. The server's commit p99 is the time its `pwrite` and `fdatasync` took")
    w("(the floor's exact, registryd's a bucket bound), to set beside the node's commit p99 in the open-loop tables.\n")
    w("| Server | CPU spun per registration | p50 | p90 | p99 | p99.9 | max | p99 of each run | server's commit p99 | machine busy | CPU steal |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    by_run = {}
    for f in floors:
        by_run.setdefault((f["mode"], f["work"]), []).append(f)
    met = {}
    for (mode, work), runs in sorted(by_run.items()):
        f = sorted(runs, key=lambda run: run["p99"])[len(runs) // 2]
        met.setdefault(mode, {})[work] = f["p99"] <= 2
        each = ", ".join(f"{run['p99']:.2f}" for run in runs)
        # A median p50 over 100 ms (a few hundred times a frame's own time) means the reading thread
        # could not keep up at all: the backlog grew for the whole run.
        saturated = " (saturated: more CPU than the reading thread has)" if f["p50"] > 100 else ""
        w(f"| floor, {mode}, {f['frames'] * 100:,}/s in batches of 100{saturated} | {work / 1000:g} µs | {f['p50']:.2f} ms | {f['p90']:.2f} ms | "
          f"**{f['p99']:.2f} ms** | {f['p999']:.2f} ms | {f['max']:.2f} ms | {each} ms | "
          f"{'' if f['commit_p99'] is None else ms(f['commit_p99'])} | {percent(f['busy'])} | {percent(f['steal'])} |")
    allowed = [work for by_work in met.values() for work, ok in by_work.items() if ok]
    floor_allows = max(allowed) if allowed else None
    if in_memory:
        lat, cpu = in_memory["latency"], in_memory.get("cpu", {})
        w(f"| registryd, data directory in memory (tmpfs, so `fdatasync` costs nothing), sized node, registryload at "
          f"{in_memory['throughput']['intended_per_second']:,.0f}/s | | {ms(lat['p50_ns'] / 1000)} | {ms(lat['p90_ns'] / 1000)} | "
          f"**{ms(lat['p99_ns'] / 1000)}** | {ms(lat['p99_9_ns'] / 1000)} | {ms(lat['max_ns'] / 1000)} | | {commit_p99(in_memory)} | "
          f"{percent(cpu.get('busy_share'))} | {percent(cpu.get('steal_share'))} |")
    w("")
    if floors:
        w("Each floor row is the run with the median p99 of its repeats. Rows whose median p99 was at most 2 ms: "
          + "; ".join(f"{mode} at " + (" and ".join(f"{work / 1000:g}" for work, ok in sorted(by_work.items()) if ok) or "none")
                      for mode, by_work in met.items())
          + " µs of CPU per registration. The reading thread does every frame's work in turn, so that CPU is what a")
        w("request path may cost, not what a server may spend in total: work done off the path takes CPU that the")
        w("path and the generator then compete for.\n")

w = targets_part.append
w("## Targets\n")
w("Issue 3's targets, from this run. Issue 29's (storage) are further down, in Journal writes, Storage, and")
w("Against the previous revision.\n")
w("| Target | Measured | Met |")
w("|---|---|---|")


limits = []


# The Targets row that bench/cluster.sh, run after this, fills in (it finds it by this text).
CLUSTER_TARGET = "3-node cluster ≥ 1/3 of one node (aim 1/2), replication lag p99 ≤ 100 ms"


def row(target, measured, met):
    w(f"| {target} | {measured} | {'yes' if met else '**no**'} |")


if batch:
    row("≥ 100,000 registrations/s on one node", f"{batch['rate']:,.0f}/s (batches of 100); {single['rate']:,.0f}/s single requests", batch["rate"] >= 100_000)
    row("≥ 2.5× Redis", f"{batch['rate'] / redis['rate']:.1f}× (batches), {single['rate'] / redis['rate']:.1f}× (single)", batch["rate"] >= 2.5 * redis["rate"])
    row("≥ 10× PostgreSQL", f"{batch['rate'] / postgres['rate']:.1f}× (batches), {single['rate'] / postgres['rate']:.1f}× (single)", batch["rate"] >= 10 * postgres["rate"])
if binding_memory:
    largest = binding_memory[-1]
    row("≤ 64 B a binding at 10M bindings", f"{largest['state_bytes_per_binding']:.0f} B at {largest['bindings']:,} "
        f"(floor, packed records: {largest['floor_bytes_per_binding']:.0f} B)", largest["state_bytes_per_binding"] <= 64)
if opened:
    p99 = opened["latency"]["p99_ns"] / 1e6
    rate = opened["throughput"]["intended_per_second"]
    lag = opened["scheduler_lag"]["p99_ns"] / 1e6
    row("p99 ≤ 2 ms in open loop at 70% of the maximum",
        f"median of {len(open_runs)} runs: p99 {p99:.2f} ms at {rate:,.0f}/s (run {'valid' if opened['judgement']['valid'] else 'INVALID'}; "
        f"generator lag p99 {lag:.2f} ms, CPU steal {percent(opened.get('cpu', {}).get('steal_share'))})"
        + (f"; on a node sized for its devices, median of {len(sized_runs)}: p99 {sized['latency']['p99_ns'] / 1e6:.2f} ms" if sized else "")
        + (f" (p99 per second, median / worst, and seconds over 2 ms: {per_second(sized)})" if sized and per_second(sized) else "")
        + (f"; on a sized node keeping `--journal-spares {spares['kept']}` made before the runs, median of {len(spared_runs)}: "
           f"p99 {spared['latency']['p99_ns'] / 1e6:.2f} ms ({per_second(spared)})" if spared and spares else ""),
        p99 <= 2)
# bench/cluster.sh (run after this) fills this row in from its own run.
row(CLUSTER_TARGET, "not run yet: `make bench-cluster` fills this in", False)
if opened and opened.get("cpu") and floor and opened["latency"]["p99_ns"] > 2_000_000:
    busy = opened["cpu"]["busy_share"]
    lag = opened["scheduler_lag"]["p99_ns"] / 1e6
    cpus = os.cpu_count() or 1
    rate = opened["throughput"]["achieved_per_second"]
    machine_us = busy * cpus / rate * 1e6
    alone = floor["latency"]["p50_ns"] / 1e6
    p99 = opened["latency"]["p99_ns"] / 1e6
    limits.append(
        "What keeps the open-loop p99 above 2 ms here, from the median run: a batch of 100 takes "
        f"{alone:.2f} ms at p50 even at 5,000/s, where little queues (its registrations are "
        f"decoded, decided, journaled and answered in turn, and the answer is decoded, on {cpus} shared cores"
        + (f"; and its commit finds the disk rested, {rested['rested_p50']:.0f} µs at p50 against {rested['hot_p50']:.0f} µs busy"
           if rested else "")
        + "); and at 70% "
        f"of the maximum the machine's CPUs were {percent(busy)} busy (server, generator and kernel together: "
        f"{machine_us:.1f} µs of CPU per registration) and the generator itself sent {lag:.2f} ms late at p99, so every "
        "hand-over between threads (four per batch) can wait for a CPU."
        + (f" The node's own commits (journal write and fdatasync) took {commit_p99(opened)} at p99 in that run, and every "
           "registration waits for at least one of them." if commit_p99(opened) else "")
        + (f" The disk probe beside the node waited {probe['p99'] / 1000:.2f} ms at p99 for an fdatasync." if probe else "")
        + (f" Left alone, the disk stalled {stalls['count']:.0f} times in {stalls['seconds']:.0f} s for up to {stalls['longest_ms']:.1f} ms"
           " (see the appendix), and every registration arriving during a stall waits for its end."
           if stalls else ""))
    if p99 / alone > 20:
        limits.append(
            f"The p99 was {p99 / alone:.0f}× a batch's own time: not the steady queueing of a busy machine, which is a few "
            "times a request's own time, but backlogs that built up for seconds. See the node's size after each run above: "
            "runs that crossed an index doubling, or ran while an index moved into its next table, have the worst tails.")
    else:
        limits.append(
            f"The p99 was {p99 / alone:.0f}× a batch's own time. At a given utilisation, queueing delays scale with the work "
            "each request brings, so holding 2 ms at this utilisation takes the whole machine's CPU per registration down "
            f"from {machine_us:.1f} µs to about {machine_us * 2 / p99:.1f} µs (server, generator and kernel together). The "
            "latency-against-load table shows the same from the other side: how far the rate can rise before p99 passes 2 ms.")
    if floors:
        limits.append(
            "The floor runs (What this machine allows) put registryd's cost beside what the machine allows: with the disk's "
            "fdatasync and the generator on the same cores, a bare server's p99 at this rate stayed within 2 ms "
            + (f"with up to {floor_allows / 1000:g} µs of CPU per registration on its request path" if floor_allows is not None
               else "with none of the CPU times tried")
            + (f"; registryd spent {server_cpu['open']:.1f} µs per registration, in all its threads, in the first open-loop run"
               if "open" in server_cpu else "")
            + (f", and with its data directory in memory, where the disk costs nothing, its p99 was "
               f"{in_memory['latency']['p99_ns'] / 1e6:.2f} ms" if in_memory else "") + ".")
if memory:
    devices, rss, _ = memory[-1]
    row(f"≤ 400 B per device at 10M devices", f"{rss / devices:.0f} B at {devices:,}", rss / devices <= 400 and devices >= 10_000_000)
for text in limits:
    w(f"\n{text}")
if verified and verified.get("verification"):
    v = verified["verification"]
    w(f"\n`--verify` after the mixed-workload run: {v['devices']:,} devices, {v['lookups']:,} lookups, "
      f"{v['lost']} lost, {v['mismatched']} mismatched.")
w("")
w = commands_part.append
w("## Commands\n")
w("Run everything again with `make bench`. Each row above came from:\n")
w("```")
for r in rows:
    w(r["command"])
for _, _, command in sweep:
    w(command)
if len(open_runs) > 1 or probed:
    w("# the open loop at 70% again, with --seed 3 + 1000 × run for runs 2, 3, …, and with --seed 3999 beside:")
    w("python3 bench/machine.py <data disk> --probe <seconds>   # at chrt -f 20 where allowed")
if sized_runs:
    w(f"registryd --expected-devices {sized_devices}   # a fresh node; then the open loop at 70% again, --seed 7 + 1000 × run")
if spared_runs and spares:
    w(f"registryd --expected-devices {sized_devices} --journal-spares {spares['kept']}   # a fresh node; once it has its spares, "
      "the open loop at 70% again, --seed 9 + 1000 × run")
w("registryload --requests <to the next point> --connections 8 --in-flight 16 --batch 100   # memory points, RSS from /proc")
if floors:
    repeats = len(floors) // max(1, len({(f["mode"], f["work"]) for f in floors}))
    w(f"cc -O2 -pthread -o floor bench/floor.c   # then each of these {repeats} time{'s' if repeats != 1 else ''}:")
    for command in dict.fromkeys(f["command"] for f in floors):
        w(command)
if in_memory:
    w(f"registryd --data-dir <a directory on tmpfs> --expected-devices {sized_devices}   # then the open loop at 70%, --seed 8")
w("```")
w("")
w("The PostgreSQL schema and function are in `bench/postgres/schema.sql`, the pgbench script in")
w("`bench/postgres/first-install.pgbench`, and the Redis script in `bench/redis/register.lua`.")
# Every section another benchmark writes (bench/section.py's markers: bench/security.sh, bench/cluster.sh,
# bench/storage.sh, bench/compare.sh against the reference revision and the previous one, make
# bench-snapshot, bench-memory, bench-restart, bench-replay, bench-catchup, bench-cluster-compare,
# bench-journal-fill, and the journal-writes measurement made by hand) is carried over from the
# current file, in its order, unless this run wrote it (the change feed's): a make bench run
# must not drop what the others measured.
carried = []
if os.path.exists("BENCHMARKS.md"):
    current = open("BENCHMARKS.md").read()
    rendered = "\n".join(out + body)
    for found in re.finditer(r"<!-- ([a-z0-9-]+):begin -->.*?<!-- \1:end -->\n", current, flags=re.S):
        if f"<!-- {found.group(1)}:begin -->" not in rendered:
            carried.append(found.group(0))

summary = ["## Summary\n", "| Measure | This run |", "|---|---:|"]
if batch:
    summary.append(f"| registrations/s, batches of 100 (closed loop) | {batch['rate']:,.0f} |")
if single:
    summary.append(f"| registrations/s, single requests (closed loop) | {single['rate']:,.0f} |")
if batch and redis and postgres:
    summary.append(f"| against Redis (everysec) / PostgreSQL, batches | {batch['rate'] / redis['rate']:.1f}× / {batch['rate'] / postgres['rate']:.1f}× |")
if opened:
    summary.append(f"| p99 in open loop at 70% of the maximum (median run) | {opened['latency']['p99_ns'] / 1e6:.2f} ms |")
if sized:
    summary.append(f"| the same on a node sized with `--expected-devices` | {sized['latency']['p99_ns'] / 1e6:.2f} ms |")
if memory:
    devices, rss, _ = memory[-1]
    summary.append(f"| resident memory at {devices:,} devices | {rss / devices:.0f} B/device |")
for devices, seconds, _ in restarts[-1:]:
    summary.append(f"| restart at {devices:,} devices (snapshot plus journal) | {seconds:.1f} s |")
summary.append("")

parts = out + [""] + summary + targets_part + [""] + body + [""] + carried + [""] + commands_part + [""] + machine_part
print("\n".join(parts))
