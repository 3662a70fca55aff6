"""The dashboard: server-rendered pages under ``/ui`` (Jinja2 templates, SVG charts drawn on
the server, one stylesheet), served by the API process.

``routes``   mounts the dashboard: its routers, static files and error pages
``login``    signing in and out with an API key
``pages``    the pages (fleet, model, feature, window, incidents, FDR gate)
``actions``  the forms that change state (acknowledge, resolve, silence)
``page``     rendering a page: templates, filters, the page context, 404s, redirects
``session``  the API key in an HTTP-only cookie, CSRF tokens, scopes
``views``    what each page shows (one module per page), read from profiles, results and alerts
``charts``   SVG geometry of sparklines, effect charts, histograms and ECDFs (pure)
"""
