"""Reading replies with a base: how an item renders to token ids (rendering), the base's passes
over many items with the beginnings they share read once (passes), the features and answer
log-probabilities it reads, cached by content (base_features), the heads fitted on those
features in one batched fit (head_fit), and the machine's one scoring process per base
(base_server) with the reader that asks it (base_client).

Both the judge (trainers.judge) and the wording trainers (trainers.wording) read with a base
through this room; it uses only the bases (trainers.bases) and the conversation builder, never
either of them. Pure Python; never imports Django."""
