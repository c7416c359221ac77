"""HiveD's cell exchange, live: the quota moves every replica applies at the windows' edges
(``quotas``) and the leader's controller over the CellOffer and CellRequest objects
(``controller``). The decisions are the pure core's (scheduler/cells/exchange/)."""
