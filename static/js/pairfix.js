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

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("form[data-dropzone]").forEach(enableDropzone);
});
