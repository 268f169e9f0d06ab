// OpenClaw's own repair of a session file, for bench/pairfix_fix.py to time: read the
// JSON lines, JSON.parse each, keep the messages and run repairToolUseResultPairing
// (npm openclaw, src/agents/session-transcript-repair.ts) over them.
//
//   node bench/openclaw_repair.mjs OPENCLAW_PACKAGE_DIR SESSION.jsonl
//
// Prints one JSON line: {"messages", "added", "dropped", "seconds"}.
import { createReadStream, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const [packageDir, session] = process.argv.slice(2);
const dist = join(packageDir, "dist");
// The bundle's chunk names carry a hash: find the one that defines the repair.
const chunk = readdirSync(dist).find(
  (name) =>
    name.startsWith("session-transcript-repair-") &&
    name.endsWith(".mjs") &&
    readFileSync(join(dist, name), "utf8").includes("function repairToolUseResultPairing("),
);
if (!chunk) throw new Error(`no repairToolUseResultPairing in ${dist}`);
const module = await import(pathToFileURL(join(dist, chunk)).href);
const repair = Object.values(module).find((f) => f.name === "repairToolUseResultPairing");

const start = process.hrtime.bigint();
const messages = [];
const lines = createInterface({ input: createReadStream(session), crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const entry = JSON.parse(line);
  if (entry.type === "message" && entry.message) messages.push(entry.message);
}
const result = repair(messages);
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
console.log(
  JSON.stringify({
    messages: messages.length,
    added: result.added.length,
    dropped: result.droppedDuplicateCount + result.droppedOrphanCount,
    seconds,
  }),
);
