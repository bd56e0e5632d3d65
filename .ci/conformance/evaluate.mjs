// Judge one run of the MCP conformance suite against an expected-failures file.
// Called by run.sh; runs on the pinned Node 22, no dependencies.
//
//   node evaluate.mjs --revision R --label L --log suite.log --results DIR \
//                     --expected expected-failures-R.txt --tally tally.txt [--verbose]
//
// A scenario FAILS when one of its checks is FAILURE or WARNING (the suite's own
// --expected-failures semantics) or when none of its checks is SUCCESS (nothing
// was verified). Scenarios the suite reports as "Not scored for R" (extension and
// pending ones under --requirements) are shown but never gate.
//
// Expected-failures file: one entry per line, `scenario  # reason` or
// `scenario:check-id  # reason` (a single check inside an otherwise generic
// scenario); a reason is required; blank lines and lines starting with # are
// ignored.
//
// Exit: 0 no unexpected failure, 1 unexpected failures, 2 unusable input.

import fs from 'node:fs';
import path from 'node:path';

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '--verbose') args.verbose = true;
  else args[a.replace(/^--/, '')] = process.argv[++i];
}
for (const k of ['revision', 'label', 'log', 'results', 'expected', 'tally']) {
  if (!args[k]) die(`evaluate.mjs: missing --${k}`);
}

function die(msg) {
  console.error(msg);
  process.exit(2);
}
const stripAnsi = (s) => s.replace(/\x1b\[[0-9;]*m/g, '');
const short = (s, n = 300) => {
  s = String(s ?? '').replace(/\s+/g, ' ').trim();
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
};

// ---- the expected-failures file --------------------------------------------
const expectedWhole = new Map(); // scenario -> reason
const expectedChecks = new Map(); // scenario -> Map(checkId -> reason)
{
  const text = fs.readFileSync(args.expected, 'utf8');
  const problems = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const hash = line.indexOf('#');
    const entry = (hash === -1 ? line : line.slice(0, hash)).trim();
    const reason = hash === -1 ? '' : line.slice(hash + 1).trim();
    const where = `${path.basename(args.expected)}:${i + 1}`;
    if (!/^[A-Za-z0-9_./-]+(:[A-Za-z0-9_./-]+)?$/.test(entry)) {
      problems.push(`${where}: not 'scenario' or 'scenario:check-id': ${entry}`);
      return;
    }
    if (!reason) {
      problems.push(`${where}: '${entry}' has no '# reason'`);
      return;
    }
    const [scenario, check] = entry.split(':');
    if (check) {
      if (!expectedChecks.has(scenario)) expectedChecks.set(scenario, new Map());
      expectedChecks.get(scenario).set(check, reason);
    } else {
      expectedWhole.set(scenario, reason);
    }
  });
  for (const s of expectedWhole.keys()) {
    if (expectedChecks.has(s)) problems.push(`${path.basename(args.expected)}: '${s}' is listed whole and per check; keep one`);
  }
  if (problems.length) die(`conformance [${args.label}]: bad expected-failures file:\n  ${problems.join('\n  ')}`);
}

// ---- the suite's stdout: scenario list and the not-scored section ------------
const log = stripAnsi(fs.readFileSync(args.log, 'utf8')).split('\n');
const summaryAt = log.lastIndexOf('=== SUMMARY ===');
if (summaryAt === -1) {
  die(
    `conformance [${args.label}]: the suite ended without its SUMMARY (crashed, timed out or bad arguments). Last lines of ${args.log}:\n` +
      log.filter(Boolean).slice(-25).map((l) => '  | ' + l).join('\n'),
  );
}
const order = [];
const summaryCounts = new Map();
const notScored = new Map();
let inNotScored = false;
for (const line of log.slice(summaryAt + 1)) {
  let m;
  if ((m = /^[✓✗] (\S+): (\d+) passed, (\d+) failed$/.exec(line))) {
    order.push(m[1]);
    summaryCounts.set(m[1], { passed: +m[2], failed: +m[3] });
  } else if (/^Not scored for /.test(line)) {
    inNotScored = true;
  } else if (inNotScored && (m = /^\s+[✓✗] (\S+) \((.*)\)$/.exec(line))) {
    notScored.set(m[1], m[2]);
  }
}
if (order.length === 0) die(`conformance [${args.label}]: no scenario lines after SUMMARY in ${args.log}`);

// ---- per-scenario checks.json (server-<scenario>-<ISO timestamp>/) ----------
const checksFor = new Map();
if (fs.existsSync(args.results)) {
  const dirs = fs.readdirSync(args.results).sort(); // timestamps sort; last wins
  for (const d of dirs) {
    const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/.exec(d);
    const f = path.join(args.results, d, 'checks.json');
    if (m && fs.existsSync(f)) checksFor.set(m[1], JSON.parse(fs.readFileSync(f, 'utf8')));
  }
}

// ---- judge -------------------------------------------------------------------
const passed = [];
const expected = [];
const partial = []; // scenario whose only failures are listed checks: its other checks passed
const unexpected = []; // {scenario, checks:[{id,status,msg}]}
const stale = []; // strings
const info = []; // not scored
for (const scenario of order) {
  let checks = checksFor.get(scenario);
  if (!checks) {
    const c = summaryCounts.get(scenario);
    checks = c.failed > 0 || c.passed === 0
      ? [{ id: scenario, status: 'FAILURE', errorMessage: `no checks.json written (scenario threw?); see ${args.log}` }]
      : [{ id: scenario, status: 'SUCCESS' }];
  }
  const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
  const anySuccess = checks.some((c) => c.status === 'SUCCESS');
  const failing = bad.length > 0 || !anySuccess;

  if (notScored.has(scenario)) {
    info.push({ scenario, failing, reason: notScored.get(scenario) });
    continue;
  }
  if (expectedWhole.has(scenario)) {
    if (failing) expected.push(scenario);
    else {
      passed.push(scenario);
      stale.push(`${scenario} is listed as an expected failure but passed: remove it from ${path.basename(args.expected)}?`);
    }
    continue;
  }
  const known = expectedChecks.get(scenario) ?? new Map();
  const surprising = bad.filter((c) => !known.has(c.id));
  if (!anySuccess && bad.length === 0) {
    surprising.push({ id: scenario, status: 'NO-SUCCESS', errorMessage: 'no check succeeded: ' + checks.map((c) => `${c.id}=${c.status}`).join(', ') });
  }
  for (const [id] of known) {
    const c = checks.find((x) => x.id === id);
    if (!c || !(c.status === 'FAILURE' || c.status === 'WARNING')) {
      stale.push(`${scenario}:${id} is listed as an expected failure but ${c ? 'is ' + c.status : 'did not run'}: remove it from ${path.basename(args.expected)}?`);
    }
  }
  if (surprising.length) unexpected.push({ scenario, checks: surprising });
  else if (failing) {
    expected.push(scenario);
    if (known.size) partial.push(`${scenario} (${checks.filter((c) => c.status === 'SUCCESS').length} checks passed, ${bad.length} listed checks failed)`);
  }
  else passed.push(scenario);
}
const ran = new Set(order);
for (const s of [...expectedWhole.keys(), ...expectedChecks.keys()]) {
  if (!ran.has(s)) stale.push(`${s} is listed in ${path.basename(args.expected)} but this suite did not run it`);
  else if (notScored.has(s)) stale.push(`${s} is listed in ${path.basename(args.expected)} but is not scored for ${args.revision}; the entry is ignored`);
}

// ---- report --------------------------------------------------------------------
const scored = order.length - info.length;
console.log(
  // Worded unlike pytest's "N passed, M failed" so that no log scraper mistakes it for
  // the test summary (pytest's stays the last line of `make test`).
  `conformance [${args.label}]: green ${passed.length} / expected-fail ${expected.length} / ` +
    `unexpected ${unexpected.length} (${scored} scored scenarios` +
    (info.length ? `, ${info.length} not scored: ${info.filter((x) => !x.failing).length} passing` : '') +
    `${args.seconds ? `, ${args.seconds} s` : ''})`,
);
console.log(`  green: ${passed.join(' ') || '-'}`);
if (partial.length) console.log(`  green but for listed checks: ${partial.join('; ')}`);
if (args.verbose) {
  console.log(`  expected failures: ${expected.join(' ') || '-'}`);
  for (const x of info) console.log(`  not scored (${x.reason}): ${x.scenario} ${x.failing ? 'FAILS' : 'passes'}`);
}
for (const u of unexpected) {
  console.log(`  UNEXPECTED FAILURE ${u.scenario}:`);
  for (const c of u.checks) console.log(`    - ${c.id} [${c.status}] ${short(c.errorMessage || c.details?.message || c.description)}`);
}
for (const s of stale) console.log(`  stale entry: ${s}`);
if (unexpected.length) console.log(`  full output: ${args.log}`);

fs.writeFileSync(args.tally, `${passed.length} ${expected.length} ${unexpected.length} ${stale.length}\n`);
process.exit(unexpected.length ? 1 : 0);
