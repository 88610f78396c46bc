// promptprism inspector: the page map (minimap) and the copy button.
//
// The map is measured from the laid-out page, not from byte counts: each
// segment's top and height are its target element's position and height as a
// fraction of the whole document, and the viewport box is the visible window
// as the same fraction. So the map, the box and the scroll position agree,
// whatever the fonts, wrapping and window width do to the layout.
"use strict";

(function () {
  function documentHeight() {
    return Math.max(document.documentElement.scrollHeight, document.body.scrollHeight, 1);
  }

  function setupMinimap() {
    var map = document.querySelector(".minimap");
    if (!map) return;
    var track = map.querySelector(".minimap-track");
    var viewport = map.querySelector(".minimap-viewport");
    var segments = Array.prototype.slice.call(map.querySelectorAll(".minimap-segment"));
    var pending = false;

    function layout() {
      pending = false;
      if (getComputedStyle(map).display === "none") return;
      var height = documentHeight();
      segments.forEach(function (segment) {
        var target = document.getElementById(segment.dataset.target);
        if (!target) return;
        var rect = target.getBoundingClientRect();
        var top = (rect.top + window.scrollY) / height;
        segment.style.top = (top * 100) + "%";
        segment.style.height = Math.max(rect.height / height * 100, 0.15) + "%";
      });
      map.classList.add("measured");
      updateViewport();
    }

    function updateViewport() {
      var height = documentHeight();
      viewport.style.top = (window.scrollY / height * 100) + "%";
      viewport.style.height = (Math.min(window.innerHeight / height, 1) * 100) + "%";
    }

    function scheduleLayout() {
      if (pending) return;
      pending = true;
      window.requestAnimationFrame(layout);
    }

    // A click on the map scrolls that point of the document to the middle of
    // the window (the viewport box centres on the click); a click on a
    // segment brings its element to the top (the box's top meets the segment).
    track.addEventListener("click", function (event) {
      var segment = event.target.closest(".minimap-segment");
      event.preventDefault();
      var height = documentHeight();
      if (segment) {
        var target = document.getElementById(segment.dataset.target);
        if (target) {
          window.scrollTo(0, target.getBoundingClientRect().top + window.scrollY);
          return;
        }
      }
      var fraction = (event.clientY - track.getBoundingClientRect().top) / track.clientHeight;
      window.scrollTo(0, fraction * height - window.innerHeight / 2);
    });

    window.addEventListener("scroll", updateViewport, { passive: true });
    window.addEventListener("resize", scheduleLayout);
    if (window.ResizeObserver) new ResizeObserver(scheduleLayout).observe(document.body);
    if (document.fonts && document.fonts.ready) document.fonts.ready.then(scheduleLayout);
    layout();
  }

  function setupCopy() {
    document.querySelectorAll("button.copy").forEach(function (button) {
      button.addEventListener("click", function () {
        var text = button.dataset.copy;
        function done() {
          button.textContent = "Copied";
          window.setTimeout(function () { button.textContent = "Copy"; }, 1500);
        }
        function fallback() {
          var field = document.createElement("textarea");
          field.value = text;
          document.body.appendChild(field);
          field.select();
          try { document.execCommand("copy"); done(); } catch (error) { button.textContent = "Select and copy"; }
          field.remove();
        }
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(done, fallback);
        } else {
          fallback();
        }
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    setupMinimap();
    setupCopy();
  });
})();
