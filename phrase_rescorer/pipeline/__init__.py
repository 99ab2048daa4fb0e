"""Steps that join the layers below into one run over Moses files: ``moses_step``, the drop-in
step for a Moses model directory (rescore its table with the network, patch its moses.ini)."""
