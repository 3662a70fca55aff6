"""A plain WSGI model server (standard library only) that logs every prediction to fleetwatch.

Serves a scikit-learn classifier trained at start-up on scikit-learn's bundled
iris dataset (no download): ``POST /predict`` with ``{"features": {...}}``
answers with the species and class probabilities and logs the prediction;
``POST /label`` logs the true species; ``GET /stats`` shows the SDK's counters.
Any WSGI server (gunicorn, uWSGI, waitress) can serve ``make_app(...)``;
``main`` uses the standard library's threaded ``wsgiref`` server.

On SIGTERM the client flushes before the process ends (``flush_on_signals``);
at normal exit it flushes too (atexit). In a pre-fork server (gunicorn) each
worker process restarts the client's background worker after the fork.

Run::

    python examples/wsgi_server.py --port 8081 --bootstrap localhost:9092
    curl -s localhost:8081/predict -d '{"features": {"sepal length (cm)": 5.1,
         "sepal width (cm)": 3.5, "petal length (cm)": 1.4, "petal width (cm)": 0.2}}'
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socketserver
import time
import uuid
from collections.abc import Callable, Iterable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import numpy as np
from sklearn.datasets import load_iris
from sklearn.ensemble import RandomForestClassifier

from sdk import Client, flush_on_signals

MODEL_ID = "iris-species"
MODEL_VERSION = "1"


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # no access log on stderr
        pass


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


def make_app(client: Client) -> Callable:
    """The WSGI application: trains the model; logs through ``client``."""
    data = load_iris()
    names = [str(n) for n in data.feature_names]
    classes = [str(c) for c in data.target_names]
    model = RandomForestClassifier(n_estimators=20, random_state=0).fit(data.data, data.target)

    def predict(body: dict) -> dict:
        start = time.perf_counter()
        features = body["features"]
        probabilities = model.predict_proba(np.array([[float(features[n]) for n in names]]))[0]
        by_class = {c: float(p) for c, p in zip(classes, probabilities, strict=True)}
        species = max(by_class, key=by_class.get)
        prediction_id = body.get("prediction_id") or uuid.uuid4().hex
        client.log_prediction(
            MODEL_ID, features, model_version=MODEL_VERSION, prediction_id=prediction_id,
            class_probabilities=by_class, predicted_label=species,
            latency_ms=(time.perf_counter() - start) * 1e3,
        )
        return {"prediction_id": prediction_id, "species": species, "probabilities": by_class}

    def label(body: dict) -> dict:
        client.log_label(MODEL_ID, body["prediction_id"], body["label"])
        return {"prediction_id": body["prediction_id"]}

    routes = {("POST", "/predict"): predict, ("POST", "/label"): label,
              ("GET", "/stats"): lambda _body: dataclasses.asdict(client.stats)}

    def app(environ: dict, start_response: Callable) -> Iterable[bytes]:
        route = routes.get((environ["REQUEST_METHOD"], environ["PATH_INFO"]))
        if route is None:
            start_response("404 Not Found", [("Content-Type", "application/json")])
            return [b'{"error": "not found"}']
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
            answer = route(json.loads(environ["wsgi.input"].read(size) or b"{}"))
        except (ValueError, KeyError, TypeError) as exc:
            start_response("400 Bad Request", [("Content-Type", "application/json")])
            return [json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode()]
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(answer).encode()]

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description="WSGI model server with fleetwatch")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--bootstrap", default=os.environ.get("FLEETWATCH_KAFKA_BOOTSTRAP", "localhost:9092"))
    parser.add_argument("--topic", default=os.environ.get("FLEETWATCH_PREDICTIONS_TOPIC", "fw.predictions"))
    parser.add_argument("--labels-topic", default="fw.labels")
    parser.add_argument("--linger-ms", type=float, default=100.0)
    args = parser.parse_args()
    client = Client(args.bootstrap, args.topic, labels_topic=args.labels_topic, linger_ms=args.linger_ms)
    client.start()
    flush_on_signals(client)
    with make_server("127.0.0.1", args.port, make_app(client), ThreadingWSGIServer, _QuietHandler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
