"""The broker's asyncio shell around the pure packages (records, storage, replication,
groups, security).

Its top level assembles one broker node: ``main`` (process, listener, shutdown), ``app``
(the aiohttp application), ``broker`` (the state every handler shares), ``config``,
``auth``, quotas, usage metering and the WebSocket registry. The jobs live in packages that
import downwards only (an import-linter layers contract): ``ws`` and ``http`` (handlers and
fronts), then the ``Broker``, then ``coordinator`` (consumer groups), ``replica`` (hosted
partitions and their replication), ``metadata`` and ``protocol`` (pure: what the APIs say).

It never imports the SDK: the REST proxy (``brokernodes.proxy``), which runs SDK consumers,
is installed into the app by the process entry point (``brokernodes.broker_main``).
"""
