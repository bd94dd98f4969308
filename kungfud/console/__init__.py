"""The web console's static files (index.html, console.js, console.css), served
by ``kungfud.server.console`` at ``GET /``. Nothing here is imported as code."""
