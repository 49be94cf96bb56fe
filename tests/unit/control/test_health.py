import pytest


@pytest.mark.django_db
def test_healthz_and_readyz_answer(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready"}
