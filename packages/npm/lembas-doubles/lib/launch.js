"use strict";
// The `fake-instance`, `fake-device` and `harness` commands npm links into node_modules/.bin:
// each runs the platform's binary with the same arguments, standard streams and exit code.

const { spawn } = require("node:child_process");
const { binaryPath } = require("./platform");

function launch(name) {
  let file;
  try {
    file = binaryPath(name);
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    process.exit(127);
  }
  const child = spawn(file, process.argv.slice(2), { stdio: "inherit" });
  // A test runner or CI stops the command with a signal: the double must get it too, since it
  // ends what it started (`--exec`) and still reports before it exits.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(signal, () => child.kill(signal));
  }
  child.on("error", (e) => {
    process.stderr.write(`lembas-doubles: cannot run ${file}: ${e.message}\n`);
    process.exit(127);
  });
  child.on("exit", (code, signal) => {
    if (signal) {
      // Die of the same signal, so the caller sees what the double saw.
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else {
      process.exit(code ?? 1);
    }
  });
}

module.exports = { launch };
