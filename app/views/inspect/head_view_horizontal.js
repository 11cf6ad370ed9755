/* EncoderLab's horizontal head view: bertviz's head view turned on its side (bertviz issue #18).
 *
 * bertviz 1.4.1's head view puts one token per row in two columns, 22.5 px a row; a 40-character Chinese sentence
 * (one token per character) is a 1 000 px tall strip, and bertviz has no option for another orientation. This is
 * the same view laid out across: the tokens attending along the top row, the tokens attended to along the bottom
 * row, one token per column, the attention lines between them. It reads bertviz's own parameters (the `params`
 * object app/views/inspect/bertviz_embed.py writes above this code, inside bertviz's requirejs(['jquery','d3'])
 * callback) and keeps bertviz's controls: its layer and attention-filter selects, the head colour boxes (click:
 * show or hide a head; double-click: only that head), and hovering a token to see its lines alone, with the
 * weights of each head shaded over the other row.
 *
 * A label that fits its column (one Chinese character) is written as usual; a longer one top to bottom (CSS
 * writing-mode vertical-rl: Chinese characters upright, a Latin piece turned sideways), so no label is wider than
 * its column. HLAYOUT (written by Python) holds the sizes, so the iframe's height is known before this runs.
 */
    const TEXT_SIZE = HLAYOUT.text_size;
    const TOP = HLAYOUT.top;              // below the head colour boxes
    const GAP = HLAYOUT.gap;              // height of the band the attention lines cross
    const MIN_COL = HLAYOUT.min_col, MAX_COL = HLAYOUT.max_col;
    const CHECKBOX_SIZE = 20;
    const WIDE = /[\u2E80-\uA4CF\uAC00-\uD7AF\uF900-\uFAFF\uFF00-\uFFEF]|[\uD840-\uD8BF][\uDC00-\uDFFF]/;  // CJK
    let headColors;
    try {
        headColors = d3.scaleOrdinal(d3.schemeCategory10);
    } catch (err) {
        headColors = d3.scale.category10();
    }
    const config = {};
    initialize();
    renderVis();
    window.addEventListener('resize', renderVis);

    function initialize() {
        config.attention = params['attention'];
        config.filter = params['default_filter'];
        config.rootDivId = params['root_div_id'];
        config.nHeads = config.attention[config.filter]['attn'][0].length;
        config.layers = params['include_layers'];
        config.headVis = new Array(config.nHeads).fill(true);
        if (params['heads']) {
            config.headVis.fill(false);
            params['heads'].forEach(x => config.headVis[x] = true);
        }
        config.layer_seq = 0;
        config.layer = config.layers[0];
        const layerEl = $(`#${config.rootDivId} #layer`);
        for (const layer of config.layers) {
            layerEl.append($("<option />").val(layer).text(layer));
        }
        layerEl.val(config.layer).change();
        layerEl.on('change', function (e) {
            config.layer = +e.currentTarget.value;
            config.layer_seq = config.layers.findIndex(layer => config.layer === layer);
            renderVis();
        });
        $(`#${config.rootDivId} #filter`).on('change', function (e) {
            config.filter = e.currentTarget.value;
            renderVis();
        });
    }

    function fits(label) {  // drawn as usual, across, when about as wide as the column
        let w = 0;
        for (const c of label) w += WIDE.test(c) ? TEXT_SIZE : 0.6 * TEXT_SIZE;
        return w <= config.col - 2;
    }

    function shown(label) {  // the label as drawn: long ones end in an ellipsis (the full one is the tooltip)
        return label.length > HLAYOUT.max_chars ? label.slice(0, HLAYOUT.max_chars - 1) + '\u2026' : label;
    }

    function renderVis() {
        const attnData = config.attention[config.filter];
        const topText = attnData.left_text, bottomText = attnData.right_text;
        const layerAttention = attnData.attn[config.layer_seq];  // [head][from][to]
        const n = Math.max(topText.length, bottomText.length);
        const room = document.documentElement.clientWidth - 12;
        config.col = Math.max(MIN_COL, Math.min(MAX_COL, Math.floor(room / n)));
        config.topH = HLAYOUT.label_px[config.filter][0];
        config.bottomH = HLAYOUT.label_px[config.filter][1];
        config.lineTop = TOP + config.topH;
        config.lineBottom = config.lineTop + GAP;
        const vis = $(`#${config.rootDivId} #vis`);
        vis.empty();
        vis.css({'overflow-x': 'auto', 'overflow-y': 'hidden'});
        const svg = d3.select(`#${config.rootDivId} #vis`).append('svg')
            .attr('width', Math.max(n * config.col, config.nHeads * CHECKBOX_SIZE) + 'px')
            .attr('height', (config.lineBottom + config.bottomH + 6) + 'px')
            .attr('class', 'hview');
        renderText(svg, topText, true, layerAttention);
        renderText(svg, bottomText, false, layerAttention);
        renderAttention(svg, layerAttention);
        drawCheckboxes(svg);
    }

    function cx(i) {
        return i * config.col + config.col / 2;
    }

    function renderText(svg, text, isTop, attention) {
        const y0 = isTop ? TOP : config.lineBottom;
        const h = isTop ? config.topH : config.bottomH;
        const container = svg.append('g').attr('id', isTop ? 'top' : 'bottom');
        // one shaded box per head and token, shown when a token of the other row is hovered
        container.append('g').classed('attentionBoxes', true)
            .selectAll('g').data(attention).enter().append('g')
            .attr('head-index', (d, i) => i)
            .selectAll('rect').data(d => isTop ? transpose(d) : d).enter().append('rect')
            .attr('x', (d, i) => i * config.col)
            .attr('width', config.col)
            .attr('fill', function () { return headColors(+this.parentNode.getAttribute('head-index')); })
            .style('opacity', 0.0);
        const tokens = container.append('g').selectAll('g').data(text).enter().append('g');
        tokens.append('rect').classed('background', true)
            .style('opacity', 0.0).attr('fill', 'lightgray')
            .attr('x', (d, i) => i * config.col).attr('y', y0)
            .attr('width', config.col).attr('height', h);
        tokens.append('title').text(d => d);
        tokens.append('text')
            .text(d => shown(d))
            .attr('font-size', TEXT_SIZE + 'px')
            .style('writing-mode', d => fits(shown(d)) ? 'horizontal-tb' : 'vertical-rl')
            .style('text-orientation', 'mixed')
            .style('cursor', 'default')
            .style('-webkit-user-select', 'none')
            .style('text-anchor', d => fits(shown(d)) ? 'middle' : isTop ? 'end' : 'start')
            .attr('x', (d, i) => cx(i))
            .attr('y', d => fits(shown(d)) ? (isTop ? y0 + h - 5 : y0 + TEXT_SIZE + 3) : (isTop ? y0 + h - 4 : y0 + 4));

        tokens.on('mouseover', function (d, index) {
            container.selectAll('.background').style('opacity', (d, i) => i === index ? 1.0 : 0.0);
            const lines = svg.select('#attention');
            lines.selectAll("line[visibility='visible']").attr('visibility', null);
            lines.attr('visibility', 'hidden');
            lines.selectAll(`line[${isTop ? 'from' : 'to'}-index='${index}']`).attr('visibility', 'visible');
            // the other row: each head's weight from (or to) this token, in stripes one per shown head
            const other = isTop ? config.bottomH : config.topH;
            const otherY = isTop ? config.lineBottom : TOP;
            const active = activeHeads();
            svg.select(isTop ? '#bottom' : '#top').selectAll('.attentionBoxes').selectAll('g')
                .selectAll('rect')
                .attr('y', function () {
                    return otherY + other * headsBefore(+this.parentNode.getAttribute('head-index')) / active;
                })
                .attr('height', other / active)
                .style('opacity', function (d) {
                    return config.headVis[+this.parentNode.getAttribute('head-index')] && d ? d[index] : 0.0;
                });
        });
        container.on('mouseleave', function () {
            d3.select(this).selectAll('.background').style('opacity', 0.0);
            svg.select('#attention').selectAll("line[visibility='visible']").attr('visibility', null);
            svg.select('#attention').attr('visibility', 'visible');
            svg.selectAll('.attentionBoxes').selectAll('g').selectAll('rect').style('opacity', 0.0);
        });
    }

    function renderAttention(svg, attention) {
        svg.select('#attention').remove();
        svg.append('g').attr('id', 'attention')
            .selectAll('.headAttention').data(attention).enter().append('g')
            .classed('headAttention', true).attr('head-index', (d, i) => i)
            .selectAll('.tokenAttention').data(d => d).enter().append('g')
            .classed('tokenAttention', true).attr('from-index', (d, i) => i)
            .selectAll('line').data(d => d).enter().append('line')
            .attr('x1', function () { return cx(+this.parentNode.getAttribute('from-index')); })
            .attr('y1', config.lineTop)
            .attr('x2', (d, j) => cx(j))
            .attr('y2', config.lineBottom)
            .attr('stroke-width', 2)
            .attr('stroke', function () { return headColors(+this.parentNode.parentNode.getAttribute('head-index')); })
            .attr('from-index', function () { return +this.parentNode.getAttribute('from-index'); })
            .attr('to-index', (d, j) => j);
        updateAttention(svg);
    }

    function updateAttention(svg) {
        svg.select('#attention').selectAll('line').attr('stroke-opacity', function (d) {
            const head = +this.parentNode.parentNode.getAttribute('head-index');
            return config.headVis[head] ? d / activeHeads() : 0.0;
        });
    }

    function headsBefore(i) {
        return config.headVis.reduce((acc, val, cur) => val && cur < i ? acc + 1 : acc, 0);
    }

    function activeHeads() {
        return config.headVis.reduce((acc, val) => val ? acc + 1 : acc, 0);
    }

    function drawCheckboxes(svg) {
        const boxes = svg.append('g');
        const box = boxes.selectAll('rect').data(config.headVis).enter().append('rect')
            .attr('fill', (d, i) => headColors(i))
            .attr('x', (d, i) => i * CHECKBOX_SIZE).attr('y', 0)
            .attr('width', CHECKBOX_SIZE).attr('height', CHECKBOX_SIZE);

        function update() {
            boxes.selectAll('rect').data(config.headVis).attr('fill', (d, i) => d ? headColors(i) : lighten(headColors(i)));
        }

        update();
        box.on('click', function (d, i) {
            if (config.headVis[i] && activeHeads() === 1) return;
            config.headVis[i] = !config.headVis[i];
            update();
            updateAttention(svg);
        });
        box.on('dblclick', function (d, i) {
            if (config.headVis[i] && activeHeads() === 1) {
                config.headVis = new Array(config.nHeads).fill(true);
            } else {
                config.headVis = new Array(config.nHeads).fill(false);
                config.headVis[i] = true;
            }
            update();
            updateAttention(svg);
        });
    }

    function lighten(color) {
        const c = d3.hsl(color);
        const increment = (1 - c.l) * 0.6;
        c.l += increment;
        c.s -= increment;
        return c;
    }

    function transpose(mat) {
        return mat[0].map((col, i) => mat.map(row => row[i]));
    }
