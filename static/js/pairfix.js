// Progressive enhancement only: every form works without this file.
"use strict";

// Drag and drop onto the upload form: hand the dropped files to its file input
// and submit, exactly as if they had been chosen with the picker.
function enableDropzone(form) {
  const input = form.querySelector('input[type="file"]');
  const zone = form.querySelector(".dropzone");
  if (!input || !zone) {
    return;
  }
  const stop = (event) => {
    event.preventDefault();
    event.stopPropagation();
  };
  ["dragenter", "dragover"].forEach((name) =>
    zone.addEventListener(name, (event) => {
      stop(event);
      zone.classList.add("dragging");
    }),
  );
  ["dragleave", "drop"].forEach((name) =>
    zone.addEventListener(name, (event) => {
      stop(event);
      zone.classList.remove("dragging");
    }),
  );
  zone.addEventListener("drop", (event) => {
    if (!event.dataTransfer || event.dataTransfer.files.length === 0) {
      return;
    }
    input.files = event.dataTransfer.files;
    form.requestSubmit();
  });
}

// Binary units, labelled as such: the limits the server states are in them too.
// As transcripts/sizes.py's binary_size writes them: "1 byte", "512 bytes", then one
// decimal, a value that rounds to 1024.0 shown in the next unit ("1.0 MiB").
function humanSize(bytes) {
  if (bytes < 1024) {
    const count = Math.trunc(bytes);
    return count === 1 ? "1 byte" : `${count} bytes`;
  }
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (unit < units.length - 1 && Math.round(value * 10) / 10 >= 1024) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

// Send the upload form by XMLHttpRequest to show how much is sent; the page it
// answers with (the session, the list, or the form with its errors) then
// replaces this one, as a plain submit would.
function enableUploadProgress(form) {
  const bar = form.querySelector("progress.upload-progress");
  const note = form.querySelector(".upload-status");
  if (!bar || !note || !window.FormData || !window.DOMParser) {
    return;
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    bar.hidden = false;
    bar.removeAttribute("value");
    note.textContent = "Starting the upload…";
    xhr.upload.addEventListener("progress", (progress) => {
      if (!progress.lengthComputable) {
        return;
      }
      bar.max = progress.total;
      bar.value = progress.loaded;
      const percent = Math.floor((100 * progress.loaded) / progress.total);
      note.textContent = `Uploading: ${percent}% (${humanSize(progress.loaded)} of ${humanSize(progress.total)})`;
    });
    xhr.upload.addEventListener("load", () => {
      bar.value = bar.max;
      note.textContent = "Uploaded: reading and checking the sessions…";
    });
    xhr.addEventListener("load", () => {
      const page = new DOMParser().parseFromString(xhr.responseText, "text/html");
      document.title = page.title;
      document.body.replaceChildren(...page.body.childNodes);
      history.pushState(null, "", xhr.responseURL || form.action);
      htmx.process(document.body);
      document.dispatchEvent(new Event("pairfix:page"));
    });
    xhr.addEventListener("error", () => {
      bar.hidden = true;
      note.textContent = "The upload failed: the connection to Pairfix was lost. Try again.";
    });
    xhr.send(new FormData(form));
  });
}

// The session list's select-all: every box on this page, then (one more click) every
// session the filter matches, which is the job form's "all matching the filter" scope.
function enableSelectAll(form) {
  const all = form.querySelector("#select-page");
  const banner = form.querySelector(".select-all-banner");
  if (!all || !banner) {
    return;
  }
  const boxes = () => Array.from(form.querySelectorAll('input[name="sessions"]'));
  const scope = (value) => form.querySelector(`input[name="scope"][value="${value}"]`);
  const count = banner.querySelector(".selected-count");
  const matching = banner.querySelector(".select-matching");
  const total = Number(banner.dataset.total);
  all.hidden = false;
  form.querySelector(".select-label").hidden = true;
  const update = () => {
    const checked = boxes().filter((box) => box.checked).length;
    all.checked = checked > 0 && checked === boxes().length;
    all.indeterminate = checked > 0 && !all.checked;
    if (scope("filter").checked) {
      count.textContent = `All ${total} session${total === 1 ? "" : "s"} are selected.`;
      banner.hidden = false;
      if (matching) {
        matching.hidden = true;
      }
      return;
    }
    count.textContent = `${checked} selected on this page.`;
    banner.hidden = checked === 0;
    if (matching) {
      matching.hidden = !all.checked;
    }
  };
  all.addEventListener("change", () => {
    boxes().forEach((box) => {
      box.checked = all.checked;
    });
    scope("selected").checked = true;
    update();
  });
  form.addEventListener("change", (event) => {
    if (event.target.name === "sessions") {
      scope("selected").checked = true;
    }
    if (event.target.name === "sessions" || event.target.name === "scope") {
      update();
    }
  });
  if (matching) {
    matching.addEventListener("click", () => {
      scope("filter").checked = true;
      update();
    });
  }
  update();
}

function enableForms() {
  document.querySelectorAll("form.repair-form").forEach(enableSelectAll);
  document.querySelectorAll("form[data-dropzone]").forEach((form) => {
    enableDropzone(form);
    enableUploadProgress(form);
  });
}

document.addEventListener("DOMContentLoaded", enableForms);
document.addEventListener("pairfix:page", enableForms);
// A page put in place by script has no load of its own: go back by loading the address.
window.addEventListener("popstate", () => window.location.reload());

// The session timeline. The rows come a window at a time: htmx loads the next
// window when the last row scrolls into view. Going somewhere not loaded (a
// deep link #r-123, the jump form, the fault panel, `n`/`p`/`j`/`k` past the
// loaded rows) asks the server for the window around it and replaces the rows.
// Without this script every one of those is a plain link or form.
const Timeline = {
  rows() {
    return document.getElementById("rows");
  },

  say(text) {
    const status = document.getElementById("timeline-status");
    if (status) {
      status.textContent = text;
    }
  },

  // Make the row with element id `anchor` the current one: scrolled to and focused.
  focus(anchor) {
    const row = anchor ? document.getElementById(anchor) : null;
    if (!row || !row.matches("tr.row")) {
      return false;
    }
    document.querySelectorAll("#rows tr.current").forEach((r) => r.classList.remove("current"));
    row.classList.add("current");
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "center" });
    return true;
  },

  // Replace the rows by the window the server gives for `params`; focus its row.
  async load(params, anchor) {
    const rows = this.rows();
    if (!rows) {
      return;
    }
    const response = await fetch(`${rows.dataset.rowsUrl}&${params}`, {
      headers: { "HX-Request": "true" },
      credentials: "same-origin",
    });
    if (response.status === 204) {
      this.say(params.startsWith("record=") ? "There is no such record." : "No more faults that way.");
      return;
    }
    if (response.headers.get("HX-Refresh")) {
      window.location.reload();
      return;
    }
    if (!response.ok) {
      this.say(`Could not load the rows (${response.status}).`);
      return;
    }
    rows.innerHTML = await response.text();
    htmx.process(rows);
    const focus = response.headers.get("X-Pairfix-Focus") || anchor;
    if (!this.focus(focus) && anchor && focus !== anchor) {
      this.say("That row is hidden by the filters; showing the nearest one.");
    }
  },

  // Go to the row `anchor` if it is loaded, else load the window `params` gives.
  go(anchor, params) {
    this.say("");
    if (!this.focus(anchor)) {
      this.load(params, anchor);
    }
  },

  // The position of the current row: the focused one, else the first one in view.
  position() {
    const current = document.querySelector("#rows tr.row.current");
    if (current) {
      return Number(current.dataset.pos);
    }
    for (const row of document.querySelectorAll("#rows tr.row")) {
      if (row.getBoundingClientRect().bottom > 0) {
        return Number(row.dataset.pos) - 1;
      }
    }
    return -1;
  },

  fault(direction) {
    const rows = this.rows();
    if (!rows) {
      return;
    }
    this.say("");
    const here = this.position();
    const faults = Array.from(rows.querySelectorAll("tr.row.has-fault"));
    const target =
      direction > 0
        ? faults.find((row) => Number(row.dataset.pos) > here)
        : faults.reverse().find((row) => Number(row.dataset.pos) < here);
    if (target) {
      this.focus(target.id);
      return;
    }
    // Not among the loaded rows: the server knows, unless every row that way is loaded.
    if (!rows.querySelector(direction > 0 ? "tr.more.after" : "tr.more.before")) {
      this.say(direction > 0 ? "No more faults below." : "No more faults above.");
      return;
    }
    this.load(direction > 0 ? `fault_after=${here}` : `fault_before=${Math.max(here, 0)}`);
  },

  followHash() {
    const match = /^#(r-(\d+))$/.exec(window.location.hash);
    if (match) {
      this.go(match[1], `record=${match[2]}`);
    }
  },
};

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || !Timeline.rows()) {
    return;
  }
  if (event.target.closest("input, select, textarea, button, [contenteditable]")) {
    return;
  }
  if (event.key === "n" || event.key === "j") {
    event.preventDefault();
    Timeline.fault(1);
  } else if (event.key === "p" || event.key === "k") {
    event.preventDefault();
    Timeline.fault(-1);
  }
});

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-anchor], a[data-record]");
  if (!link || !Timeline.rows() || event.button !== 0 || event.ctrlKey || event.metaKey) {
    return;
  }
  event.preventDefault();
  const anchor = link.dataset.anchor || `r-${link.dataset.record}`;
  history.replaceState(null, "", `#${anchor}`);
  Timeline.go(anchor, link.dataset.pos ? `at=${link.dataset.pos}` : `record=${link.dataset.record}`);
});

document.addEventListener("submit", (event) => {
  const form = event.target.closest("form.jump-form");
  if (!form || !Timeline.rows()) {
    return;
  }
  event.preventDefault();
  const record = form.elements.record.value;
  history.replaceState(null, "", `#r-${record}`);
  Timeline.go(`r-${record}`, `record=${encodeURIComponent(record)}`);
});

window.addEventListener("hashchange", () => Timeline.followHash());

function startTimeline() {
  const rows = Timeline.rows();
  if (rows && rows.dataset.focus) {
    Timeline.focus(rows.dataset.focus);
  }
  Timeline.followHash();
}
document.addEventListener("DOMContentLoaded", startTimeline);
document.addEventListener("pairfix:page", startTimeline);

// When the timeline itself is swapped in (a policy or filter change, or a build that
// finished), go to the row the address names, if any.
document.addEventListener("htmx:afterSettle", (event) => {
  if (event.target && event.target.id === "timeline") {
    startTimeline();
  }
});

// Rows loaded above the ones in view must not move them: keep the row below the
// loader where it was on the screen (the browser's own scroll anchoring may pick
// the loader itself, which the swap removes).
let keptInView = null;
document.addEventListener("htmx:beforeSwap", (event) => {
  const loader = event.detail.elt;
  if (loader && loader.matches && loader.matches("#rows tr.more.before")) {
    const below = loader.nextElementSibling;
    keptInView = below ? { row: below, top: below.getBoundingClientRect().top } : null;
  }
});
document.addEventListener("htmx:afterSwap", () => {
  if (keptInView && keptInView.row.isConnected) {
    window.scrollBy(0, keptInView.row.getBoundingClientRect().top - keptInView.top);
  }
  keptInView = null;
});
