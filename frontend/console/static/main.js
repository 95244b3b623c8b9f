// prefixroute console: start. Loaded last, once every page is defined.
// (The console's scripts are classic scripts sharing one global scope,
// run in document order: app.js, charts.js, overview.js, operate.js, main.js.)
"use strict";

// ---------- start ----------

document.getElementById("login").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
  document.getElementById("token").value = "";
  document.getElementById("signout").hidden = false;
  tick();
});
document.getElementById("signout").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); location.reload(); });
document.getElementById("signout").hidden = !sessionStorage.getItem(TOKEN_KEY);
window.addEventListener("hashchange", () => { navigate(); document.getElementById("view").focus(); });
navigate();
setInterval(tick, POLL_MS);
