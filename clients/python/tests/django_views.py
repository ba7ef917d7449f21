"""The Django views the tests drive (the URLconf of django_settings): one
view for every path. With an x-test-answer header it is the handler of
clients/conformance/draft-cases.json: one effect, then exactly the answer
the step asks for. Without, it is the storm's charge: one effect, then a
failure one time in five when the body says "fail": "random" (an exception
or a 503), else 201 with Location and X-Order-Id."""
import base64
import json
import random

from django.http import HttpResponse, JsonResponse
from django.urls import re_path


def _effect(request, amount, served_by):
    idem = request.idem
    return idem.connection.execute(
        "INSERT INTO shop.effects (scope, idempotency_key, amount, served_by)"
        " VALUES (%s, %s, %s, %s) RETURNING id",
        [idem.scope, idem.key, amount, served_by]).fetchone()[0]


def table(request, answer):
    _effect(request, 0, "django table")
    if answer.get("throw"):
        raise RuntimeError("the view failed after its effect, as the case asks")
    body = base64.b64decode(answer["body_base64"]) if "body_base64" in answer \
        else answer.get("body", "").encode("utf-8")
    response = HttpResponse(body, status=answer["status"])
    del response["Content-Type"]  # exactly the answer's headers
    for name, value in answer["headers"]:
        response[name] = value
    return response


def charge(request):
    body = json.loads(request.body)
    charge_id = _effect(request, body["amount"], request.idem.kind)
    if body.get("fail") == "random":
        roll = random.random()
        if roll < 0.1:
            raise RuntimeError("a random failure after the charge")
        if roll < 0.2:
            return JsonResponse({"error": "try again"}, status=503)
    return JsonResponse({"charge_id": charge_id, "amount": body["amount"],
                         "taken_as": request.idem.kind}, status=201,
                        headers={"Location": f"/charges/{charge_id}",
                                 "X-Order-Id": str(charge_id)})


def any_path(request):
    answer = request.headers.get("x-test-answer")
    if answer is not None:
        return table(request, json.loads(answer))
    return charge(request)


urlpatterns = [re_path(r"^.*$", any_path)]
