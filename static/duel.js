// The Duel page: pick A or B (keys A/← and B/→), or call it a tie (T) or both bad (X), tick
// reasons (1–7), add a note, skip (S), next (N or Enter), undo one's last pick (U) until it
// is frozen. It talks to the same API integrations use (/api/rl/...), with the page's session.
// The server keeps which version wrote A and B; this page learns it only from the pick's
// answer, and shows it with the judge's scores and a form to overrule the judge.
(function () {
  "use strict";

  const root = document.getElementById("duel");
  if (!root) return;
  const pack = root.dataset.pack;
  const selection = JSON.parse(document.getElementById("duel-selection").textContent || "{}");
  const dimensions = JSON.parse(document.getElementById("duel-dimensions").textContent);
  const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
  const $ = (id) => document.getElementById(id);
  const state = {
    item: JSON.parse($("duel-first-item").textContent),
    picked: false,
    busy: false,
    lastPick: null, // the id of this reviewer's last pick on this page, while it can be undone
  };
  const VERDICTS = { tie: "You called it a tie.", both_bad: "You said both are bad." };

  function say(text, isError) {
    const message = $("duel-message");
    message.textContent = text || "";
    message.classList.toggle("error", Boolean(isError));
  }

  async function api(method, url, body) {
    const response = await fetch(url, {
      method,
      credentials: "same-origin",
      headers: {
        Accept: "application/json",
        "Content-Type": "application/json",
        "X-CSRFToken": csrf,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = response.status === 204 ? null : await response.json().catch(() => null);
    if (!response.ok) {
      const detail = data && (data.detail || JSON.stringify(data));
      throw new Error(detail || `The server answered ${response.status}.`);
    }
    return data;
  }

  function reasonBoxes() {
    return Array.from(document.querySelectorAll('#reasons input[name="reason"]'));
  }

  function show(item) {
    state.item = item;
    state.picked = false;
    $("duel-empty").hidden = Boolean(item);
    $("duel-item").hidden = !item;
    if (!item) return;
    $("moment-at").textContent = item.moment.at;
    $("moment-kind").textContent = item.moment.kind === "real" ? "real call" : "simulated call";
    const dialogue = $("dialogue");
    dialogue.replaceChildren();
    for (const turn of item.moment.dialogue) {
      const line = document.createElement("div");
      line.className = `turn ${turn.speaker}`;
      const who = document.createElement("small");
      who.className = "muted";
      who.textContent = turn.speaker === "agent" ? "Agent" : "Customer";
      line.append(who, document.createElement("br"), document.createTextNode(turn.text));
      dialogue.append(line);
    }
    if (!item.moment.dialogue.length) {
      dialogue.textContent = "(The call starts here.)";
    }
    for (const side of ["A", "B"]) {
      const shown = item[side.toLowerCase()];
      $(`text-${side}`).textContent = shown.text;
      // Why the on-topic guard capped this reply's judge total (null: it did not).
      $(`capped-${side}`).hidden = !shown.on_topic;
      $(`capped-why-${side}`).textContent = shown.on_topic || "";
      $(`reveal-${side}`).hidden = true;
      $(`reveal-${side}`).replaceChildren();
      $(`reply-${side}`).classList.remove("chosen", "rejected");
      $(`pick-${side}`).disabled = false;
    }
    for (const box of reasonBoxes()) box.checked = false;
    for (const button of document.querySelectorAll("button[data-kind]")) button.disabled = false;
    $("pick-note").value = "";
    $("pick-note").disabled = false;
    $("skip").disabled = false;
    $("next").disabled = true;
    root.dataset.pair = String(item.pair);
    root.dataset.picked = "false";
  }

  async function next() {
    if (state.busy) return;
    state.busy = true;
    say("");
    try {
      const params = new URLSearchParams({ pack, ...selection });
      const answer = await api("GET", `/api/rl/duel/next/?${params}`);
      show(answer.item);
      if (!answer.item) say(answer.detail);
    } catch (error) {
      say(error.message, true);
    } finally {
      state.busy = false;
    }
  }

  function pct(value) {
    return value === null || value === undefined ? "—" : value.toFixed(2);
  }

  function renderReveal(side, info, chosen, kind) {
    const box = $(`reveal-${side}`);
    box.replaceChildren();
    const who = document.createElement("p");
    const verdict =
      VERDICTS[kind] || (chosen ? "You chose this one." : "You passed this one over.");
    who.innerHTML = "";
    const strong = document.createElement("strong");
    strong.textContent = info.label;
    who.append("Written by ", strong, info.move ? ` · move: ${info.move}` : "", ` · ${verdict}`);
    box.append(who);
    if (!info.judge) {
      box.append("The judge has not scored this reply.");
      box.hidden = false;
      return;
    }
    const total = document.createElement("p");
    total.className = "judge-total";
    total.textContent = `Judge (${info.judge.judge_model}): ${pct(info.judge.total)} overall`;
    box.append(total);
    const table = document.createElement("table");
    table.className = "judge-scores";
    const head = table.createTHead().insertRow();
    for (const title of ["Dimension", "Judge", "Your verdict"]) {
      const cell = document.createElement("th");
      cell.textContent = title;
      head.append(cell);
    }
    const body = table.createTBody();
    for (const [name, label] of dimensions) {
      const row = body.insertRow();
      row.insertCell().textContent = label;
      const score = row.insertCell();
      score.textContent = pct(info.judge.scores[name]);
      score.title = info.judge.reasons[name] || "";
      const select = document.createElement("select");
      select.name = `verdict-${side}-${name}`;
      select.dataset.dimension = name;
      select.setAttribute("aria-label", `Your verdict on ${label} for reply ${side}`);
      for (const [value, text] of [["", "agree"], ["1", "good (1)"], ["0.5", "so-so (0.5)"], ["0", "poor (0)"]]) {
        const option = document.createElement("option");
        option.value = value;
        option.textContent = text;
        select.append(option);
      }
      row.insertCell().append(select);
    }
    box.append(table);
    const button = document.createElement("button");
    button.type = "button";
    button.className = "overrule";
    button.id = `overrule-${side}`;
    button.textContent = `Overrule the judge on ${side}`;
    button.addEventListener("click", () => overrule(side, info.reply));
    box.append(button);
    box.hidden = false;
  }

  // side: "A" or "B" for a preference; kind: "tie" or "both_bad" (no side).
  async function pick(side, kind) {
    if (!state.item || state.picked || state.busy) return;
    state.busy = true;
    say("");
    const reasons = reasonBoxes().filter((box) => box.checked).map((box) => box.value);
    const note = $("pick-note").value.trim();
    const body = { pair: state.item.pair, reasons, note, kind: kind || "preference" };
    if (!kind) body.chosen = side;
    try {
      const answer = await api("POST", "/api/rl/picks/", body);
      state.picked = true;
      state.lastPick = answer.id;
      root.dataset.picked = "true";
      for (const each of ["A", "B"]) {
        $(`pick-${each}`).disabled = true;
        if (!kind) $(`reply-${each}`).classList.add(each === side ? "chosen" : "rejected");
        renderReveal(each, answer.reveal[each], each === side, kind);
      }
      for (const button of document.querySelectorAll("button[data-kind]")) button.disabled = true;
      $("pick-note").disabled = true;
      $("skip").disabled = true;
      $("next").disabled = false;
      $("undo").hidden = false;
      const what = kind === "tie" ? "a tie" : kind === "both_bad" ? "both bad" : `${side} is better`;
      say(`Saved: ${what}${reasons.length ? ` (${reasons.join(", ")})` : ""}${note ? ", with your note" : ""}.`);
    } catch (error) {
      say(error.message, true);
    } finally {
      state.busy = false;
    }
  }

  // Take the last pick back (refused with the reason once a frozen version holds it): the
  // pair comes back reserved for this reviewer, shown again to pick anew.
  async function undo() {
    if (!state.lastPick || state.busy) return;
    state.busy = true;
    say("");
    try {
      const answer = await api("POST", "/api/rl/picks/undo/", { pack, pick: state.lastPick });
      state.lastPick = null;
      $("undo").hidden = true;
      if (answer.item) show(answer.item);
      say(`Undone: pick ${answer.undone} is gone and its pair is back in the queue.`);
      if (window.htmx && $("duel-panel")) window.htmx.trigger($("duel-panel"), "duel-refresh");
      if (!answer.item) {
        state.busy = false;
        await next();
      }
    } catch (error) {
      say(error.message, true);
    } finally {
      state.busy = false;
    }
  }

  async function skip() {
    if (!state.item || state.picked || state.busy) return;
    try {
      await api("POST", `/api/rl/duel/${state.item.pair}/skip/`);
    } catch (error) {
      say(error.message, true);
      return;
    }
    await next();
  }

  async function overrule(side, replyId) {
    const scores = {};
    for (const select of document.querySelectorAll(`#reveal-${side} select`)) {
      if (select.value !== "") scores[select.dataset.dimension] = Number(select.value);
    }
    if (!Object.keys(scores).length) {
      say("Choose a verdict on at least one dimension to overrule the judge.", true);
      return;
    }
    try {
      await api("POST", "/api/rl/overrides/", { reply: replyId, scores });
      say(`Overruled the judge on ${side} (${Object.keys(scores).join(", ")}). The next rescoring uses it.`);
    } catch (error) {
      say(error.message, true);
    }
  }

  function toggleReason(number) {
    const box = reasonBoxes().find((each) => each.dataset.key === String(number));
    if (box && !state.picked) box.checked = !box.checked;
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    // Typing in a field or choosing in a list keeps its own keys.
    if (target.closest && target.closest("select, textarea, input:not([type=checkbox])")) return;
    if ($("duel-item").hidden && !["n", "N", "Enter", "u", "U"].includes(event.key)) return;
    const key = event.key;
    if (key === "a" || key === "A" || key === "ArrowLeft") pick("A");
    else if (key === "b" || key === "B" || key === "ArrowRight") pick("B");
    else if (key === "t" || key === "T") pick(null, "tie");
    else if (key === "x" || key === "X") pick(null, "both_bad");
    else if ((key === "u" || key === "U") && state.lastPick) undo();
    else if (/^[1-7]$/.test(key)) toggleReason(Number(key));
    else if (key === "s" || key === "S") skip();
    else if (key === "n" || key === "N" || key === "Enter") {
      if (state.picked || !state.item) next();
      else return;
    } else return;
    event.preventDefault();
  });

  for (const button of document.querySelectorAll("button[data-pick]")) {
    button.addEventListener("click", () => pick(button.dataset.pick));
  }
  for (const button of document.querySelectorAll("button[data-kind]")) {
    button.addEventListener("click", () => pick(null, button.dataset.kind));
  }
  $("undo").addEventListener("click", undo);
  $("skip").addEventListener("click", skip);
  $("next").addEventListener("click", next);
  show(state.item);
})();
