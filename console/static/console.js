// outerloop console: follows an item's event stream (server-sent events) and refreshes the
// server-rendered parts of the page when something happens. No framework, no build step.
(function () {
  'use strict';
  var live = document.getElementById('live');
  if (!live || !window.EventSource || !window.fetch) { return; }
  var status = document.getElementById('live-status');
  function say(text) {
    status = document.getElementById('live-status');
    if (status) { status.textContent = text; }
  }
  if (live.getAttribute('data-terminal') === 'true') { return; }

  var after = live.getAttribute('data-after');
  var url = live.getAttribute('data-events') + (after ? '?after=' + encodeURIComponent(after) : '');
  var es = null;
  var pending = null;
  var busy = false;
  var finished = false;

  function connect() {
    es = new EventSource(url);
    es.onopen = function () { say('● live'); };
    es.onerror = function () {
      if (finished) { return; }
      // The browser retries a dropped stream itself; a refused one (server busy) is closed
      // for good, so this page tries again later, refreshing first in case it missed events.
      if (es.readyState === EventSource.CLOSED) {
        say('live updates paused; retrying…');
        setTimeout(function () { refresh(); connect(); }, 10000);
      } else {
        say('reconnecting…');
      }
    };
    es.onmessage = function () {
      // Events come in bursts (a step, an exit, a decision): refresh once per burst.
      if (pending) { clearTimeout(pending); }
      pending = setTimeout(refresh, 150);
    };
  }
  connect();

  // refresh fetches this page again and swaps in its live region. The actions are swapped only
  // when the item's state changed, so text being typed into a form is not lost.
  function refresh() {
    pending = null;
    if (busy) { pending = setTimeout(refresh, 150); return; }
    busy = true;
    fetch(location.pathname, { credentials: 'same-origin', headers: { Accept: 'text/html' } })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, 'text/html');
        var fresh = doc.getElementById('live');
        if (!fresh) { return; }
        live.replaceWith(document.adoptNode(fresh));
        live = fresh;
        var oldActs = document.getElementById('actions');
        var newActs = doc.getElementById('actions');
        if (oldActs && newActs && oldActs.getAttribute('data-state') !== newActs.getAttribute('data-state')) {
          oldActs.replaceWith(document.adoptNode(newActs));
        }
        if (live.getAttribute('data-terminal') === 'true') {
          finished = true;
          es.close();
          say('finished');
        } else {
          say('● live');
        }
      })
      .catch(function () { say('refresh failed; reload the page'); })
      .then(function () { busy = false; });
  }
})();
