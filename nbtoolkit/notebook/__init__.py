"""The IPython / ipywidgets front: magics, the configuration form, live charts."""
