"""EncoderLab's Streamlit layer: navigation, the shared sidebar, cached loaders, renderers."""
