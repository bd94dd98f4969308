"""The web console's static files (index.html, console.css and the script's ES
modules: main.js, api.js, dom.js, session.js, pages/*.js; favicon.svg), served by
``kungfud.server.console`` at ``GET /`` (docs/console.md). Nothing here is
imported as Python code."""
