"""Effects: partial dependence, Friedman's H statistics and functional ANOVA."""
