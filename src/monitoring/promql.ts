// PromQL as kiteline writes it and as it limits a caller's query to namespaces (docs/monitoring.md).
//
// A namespace-limited caller's query is parsed with Prometheus' own PromQL grammar for JavaScript
// (@prometheus-io/lezer-promql) and PRINTED AGAIN from the syntax tree, token by token, with the
// matcher `namespace=~"<allowed>"` added to every vector selector. The text sent to Prometheus is
// therefore ours, not the caller's with something spliced in: no comment, odd spacing or string
// trick can hide a selector from the rewrite, because only what the tree holds is printed, each
// composite parenthesised, each leaf token checked against its strict form. Whatever the tree has
// that this file does not know (a newer construct, an error node) is a 400, never passed on.
// `info()` is refused: it reads series of its own (target_info) beside the ones selected.
import type { parser as PromqlParser } from '@prometheus-io/lezer-promql';
import { BadRequestError } from '../errors.js';

type SyntaxNode = ReturnType<typeof PromqlParser.parse>['topNode'];

/** The longest query a namespace-limited caller may send (characters). */
export const MAX_QUERY_LENGTH = 16_384;
/** Deeper nesting is refused (the printer recurses). */
const MAX_DEPTH = 200;

/** A PromQL double-quoted string of any value (JSON's escapes are PromQL's: Go's strconv rules). */
export function promqlString(value: string): string {
  return JSON.stringify(value);
}

/** A literal for an RE2 regular expression (Prometheus anchors its regexes). */
export function regexLiteral(value: string): string {
  return value.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&');
}

/** The matcher that keeps a selector to these namespaces (at least one). */
export function namespaceMatcher(namespaces: readonly string[]): string {
  if (namespaces.length === 0) throw new Error('namespaceMatcher needs at least one namespace');
  return `namespace=~${promqlString(namespaces.map(regexLiteral).join('|'))}`;
}

/**
 * The query with every vector selector limited to `namespaces` (non-empty), printed from its
 * syntax tree. 400 for a query that does not parse or uses what the printer does not know.
 */
export async function limitToNamespaces(query: string, namespaces: readonly string[]): Promise<string> {
  if (query.length > MAX_QUERY_LENGTH) throw new BadRequestError(`query: at most ${MAX_QUERY_LENGTH} characters`);
  // The grammar loads at the first limited query: a third of a second of the process's start otherwise.
  const { parser } = await import('@prometheus-io/lezer-promql');
  const tree = parser.parse(query);
  tree.iterate({
    enter(node) {
      if (node.type.isError) throw new BadRequestError(`query: invalid PromQL at character ${node.from + 1}`);
    },
  });
  return new Printer(query, namespaceMatcher(namespaces)).expr(onlyChild(tree.topNode), 0);
}

/** The named children of a node, comments left out. */
function childrenOf(node: SyntaxNode): SyntaxNode[] {
  const out: SyntaxNode[] = [];
  for (let c = node.firstChild; c; c = c.nextSibling) if (c.name !== 'LineComment') out.push(c);
  return out;
}

function onlyChild(node: SyntaxNode): SyntaxNode {
  const children = childrenOf(node);
  if (children.length !== 1) throw unsupported(node);
  return children[0];
}

function unsupported(node: SyntaxNode): BadRequestError {
  return new BadRequestError(
    `query: ${node.name} at character ${node.from + 1} is not supported for a namespace-limited caller`,
  );
}

const BINARY_OPERATORS: Record<string, string> = {
  Pow: '^',
  Mul: '*',
  Div: '/',
  Mod: '%',
  Atan2: 'atan2',
  Add: '+',
  Sub: '-',
  Eql: '==',
  Gte: '>=',
  Gtr: '>',
  TrimUpper: '</',
  TrimLower: '>/',
  Lte: '<=',
  Lss: '<',
  Neq: '!=',
  And: 'and',
  Unless: 'unless',
  Or: 'or',
};
const MATCH_OPERATORS: Record<string, string> = { EqlSingle: '=', Neq: '!=', EqlRegex: '=~', NeqRegex: '!~' };
const FILL_CLAUSES: Record<string, string> = {
  FillClause: 'fill',
  FillLeftClause: 'fill_left',
  FillRightClause: 'fill_right',
};
/** Nodes that modify the expression before them (Go's parser binds them tighter than any operator). */
const POSTFIX = new Set([
  'MatrixSelector',
  'SubqueryExpr',
  'OffsetExpr',
  'StepInvariantExpr',
  'AnchoredExpr',
  'SmoothedExpr',
]);

// Leaf tokens, each in its strict form (the grammar's tokenizer is looser: an unterminated string is
// still a StringLiteral to it).
const STRING = /^(?:"(?:[^"\\\n]|\\[^\n])*"|'(?:[^'\\\n]|\\[^\n])*'|`[^`]*`)$/;
const IDENTIFIER = /^[A-Za-z_:][A-Za-z0-9_:]*$/;
const LABEL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FUNCTION_NAME = /^[a-z][a-z0-9_]*$/;
const NUMBER = /^[+-]?[0-9A-Za-z_.]+(?:[eE][+-]?[0-9_]+)?$/;

class Printer {
  constructor(
    private readonly source: string,
    private readonly matcher: string,
  ) {}

  private text(node: SyntaxNode): string {
    return this.source.slice(node.from, node.to);
  }

  private leaf(node: SyntaxNode, form: RegExp): string {
    const text = node.name === 'NumberDurationLiteral' ? this.text(node).replace(/\s+/g, '') : this.text(node);
    if (!form.test(text)) throw new BadRequestError(`query: invalid token at character ${node.from + 1}`);
    return text;
  }

  expr(node: SyntaxNode, depth: number): string {
    if (depth > MAX_DEPTH) throw new BadRequestError(`query: nested deeper than ${MAX_DEPTH}`);
    const d = depth + 1;
    const c = childrenOf(node);
    switch (node.name) {
      case 'VectorSelector':
        return this.vectorSelector(c);
      case 'ParenExpr':
        return `(${this.expr(onlyChild(node), d)})`;
      case 'NumberDurationLiteral':
        return this.leaf(node, NUMBER);
      case 'StringLiteral':
        return this.leaf(node, STRING);
      case 'UnaryExpr':
        return `${this.unaryOperator(c[0])}(${this.expr(this.at(c, 1, node), d)})`;
      case 'BinaryExpr':
        return this.binary(node, c, d, (right) => this.expr(right, d));
      case 'FunctionCall': {
        const name = this.leaf(onlyChild(this.at(c, 0, node)), FUNCTION_NAME);
        if (name === 'info') throw new BadRequestError('query: info() is not allowed for a namespace-limited caller');
        return `${name}(${this.args(this.at(c, 1, node), d)})`;
      }
      case 'AggregateExpr':
        return this.aggregate(node, c, d);
      default:
        if (POSTFIX.has(node.name)) return this.postfix(node, '', d);
        throw unsupported(node);
    }
  }

  private at(children: SyntaxNode[], index: number, parent: SyntaxNode): SyntaxNode {
    const child = children[index];
    if (!child) throw unsupported(parent);
    return child;
  }

  private unaryOperator(node: SyntaxNode): string {
    const op = this.text(node);
    if (node.name !== 'UnaryOp' || (op !== '-' && op !== '+')) throw unsupported(node);
    return op;
  }

  /**
   * A chain of modifiers (`[5m] @ 100 offset 1m`) applies to the expression under it, and on an
   * operation to the operation's last operand, as Go's parser reads `a + b offset 1m` and
   * `-a[5m] @ 100` (the JavaScript grammar puts them on the sum, the negation).
   */
  private postfix(node: SyntaxNode, suffix: string, depth: number): string {
    if (depth > MAX_DEPTH) throw new BadRequestError(`query: nested deeper than ${MAX_DEPTH}`);
    const d = depth + 1;
    const c = childrenOf(node);
    if (POSTFIX.has(node.name)) return this.postfix(this.at(c, 0, node), this.suffix(node, c, d) + suffix, d);
    if (node.name === 'BinaryExpr') return this.binary(node, c, d, (right) => this.postfix(right, suffix, d));
    if (node.name === 'UnaryExpr')
      return `${this.unaryOperator(c[0])}(${this.postfix(this.at(c, 1, node), suffix, d)})`;
    return `${this.expr(node, d)}${suffix}`;
  }

  /** What a postfix node adds after its expression. */
  private suffix(node: SyntaxNode, c: SyntaxNode[], d: number): string {
    switch (node.name) {
      case 'MatrixSelector':
        return `[${this.duration(this.at(c, 1, node), d)}]`;
      case 'SubqueryExpr':
        return `[${this.duration(this.at(c, 1, node), d)}:${c[2] ? this.duration(c[2], d) : ''}]`;
      case 'OffsetExpr':
        return ` offset ${this.duration(this.at(c, 2, node), d)}`;
      case 'StepInvariantExpr': {
        const at = this.at(c, 2, node);
        if (at.name === 'NumberDurationLiteral') return ` @ ${this.leaf(at, NUMBER)}`;
        const which = onlyChild(at).name;
        if (which === 'AtStart') return ' @ start()';
        if (which === 'AtEnd') return ' @ end()';
        throw unsupported(at);
      }
      case 'AnchoredExpr':
        return ' anchored';
      case 'SmoothedExpr':
        return ' smoothed';
      default:
        throw unsupported(node);
    }
  }

  private vectorSelector(c: SyntaxNode[]): string {
    let name = '';
    const matchers: string[] = [];
    for (const part of c) {
      if (part.name === 'Identifier' && name === '' && matchers.length === 0) name = this.leaf(part, IDENTIFIER);
      else if (part.name === 'LabelMatchers') matchers.push(...childrenOf(part).map((m) => this.labelMatcher(m)));
      else throw unsupported(part);
    }
    matchers.push(this.matcher);
    return `${name}{${matchers.join(', ')}}`;
  }

  private labelMatcher(node: SyntaxNode): string {
    const c = childrenOf(node);
    if (node.name === 'QuotedLabelName') return this.leaf(onlyChild(node), STRING);
    if (node.name !== 'UnquotedLabelMatcher' && node.name !== 'QuotedLabelMatcher') throw unsupported(node);
    const label = this.labelName(this.at(c, 0, node));
    const op = MATCH_OPERATORS[onlyChild(this.at(c, 1, node)).name];
    if (!op) throw unsupported(node);
    return `${label}${op}${this.leaf(this.at(c, 2, node), STRING)}`;
  }

  private labelName(node: SyntaxNode): string {
    if (node.name === 'LabelName') return this.leaf(node, LABEL_NAME);
    if (node.name === 'QuotedLabelName') return this.leaf(onlyChild(node), STRING);
    throw unsupported(node);
  }

  private groupingLabels(node: SyntaxNode): string {
    if (node.name !== 'GroupingLabels') throw unsupported(node);
    return `(${childrenOf(node)
      .map((l) => this.labelName(l))
      .join(', ')})`;
  }

  private args(body: SyntaxNode, d: number): string {
    if (body.name !== 'FunctionCallBody') throw unsupported(body);
    return childrenOf(body)
      .map((a) => this.expr(a, d))
      .join(', ');
  }

  private aggregate(node: SyntaxNode, c: SyntaxNode[], d: number): string {
    const op = onlyChild(this.at(c, 0, node));
    const opName = this.text(op).toLowerCase();
    if (!FUNCTION_NAME.test(opName)) throw unsupported(op);
    let modifier = '';
    let body: SyntaxNode | undefined;
    for (const part of c.slice(1)) {
      if (part.name === 'FunctionCallBody' && !body) body = part;
      else if (part.name === 'AggregateModifier' && !modifier) {
        const [kind, labels] = childrenOf(part);
        if (!kind || !labels || (kind.name !== 'By' && kind.name !== 'Without')) throw unsupported(part);
        modifier = ` ${kind.name === 'By' ? 'by' : 'without'} ${this.groupingLabels(labels)}`;
      } else throw unsupported(part);
    }
    if (!body) throw unsupported(node);
    return `${opName}${modifier} (${this.args(body, d)})`;
  }

  /** `(left) op modifiers (right)`, the right operand printed by `right`. */
  private binary(node: SyntaxNode, c: SyntaxNode[], d: number, right: (node: SyntaxNode) => string): string {
    const [left, op, ...rest] = c;
    const rightNode = rest.pop();
    const symbol = op && BINARY_OPERATORS[op.name];
    if (!left || !symbol || !rightNode) throw unsupported(node);
    const modifiers = rest.map((m) => this.binaryModifier(m));
    return `(${this.expr(left, d)}) ${[symbol, ...modifiers].join(' ')} (${right(rightNode)})`;
  }

  private binaryModifier(node: SyntaxNode): string {
    const c = childrenOf(node);
    switch (node.name) {
      case 'BoolModifier':
        return 'bool';
      case 'MatchingModifierClause': {
        const [kind, labels, group, groupLabels] = c;
        if (!kind || !labels || (kind.name !== 'On' && kind.name !== 'Ignoring')) throw unsupported(node);
        let out = `${kind.name === 'On' ? 'on' : 'ignoring'} ${this.groupingLabels(labels)}`;
        if (group) {
          if (group.name !== 'GroupLeft' && group.name !== 'GroupRight') throw unsupported(group);
          out += ` ${group.name === 'GroupLeft' ? 'group_left' : 'group_right'}`;
          if (groupLabels) out += ` ${this.groupingLabels(groupLabels)}`;
        }
        return out;
      }
      case 'FillModifier':
        return c
          .map((clause) => {
            const keyword = FILL_CLAUSES[clause.name];
            const value = childrenOf(clause).find((v) => v.name === 'NumberDurationLiteral');
            if (!keyword || !value) throw unsupported(clause);
            return `${keyword}(${this.leaf(value, NUMBER)})`;
          })
          .join(' ');
      default:
        throw unsupported(node);
    }
  }

  /** A duration expression (a range, a step, an offset): numbers, + - * / % ^, step(), range(), min_of, max_of. */
  private duration(node: SyntaxNode, depth: number): string {
    if (depth > MAX_DEPTH) throw new BadRequestError(`query: nested deeper than ${MAX_DEPTH}`);
    const d = depth + 1;
    const c = childrenOf(node);
    switch (node.name) {
      case 'NumberDurationLiteralInDurationContext':
        return this.leaf(node, NUMBER);
      case 'DurationStep':
        return 'step()';
      case 'DurationRange':
        return 'range()';
      case 'DurationMinOf':
      case 'DurationMaxOf': {
        const [a, b] = c;
        if (!a || !b || c.length !== 2) throw unsupported(node);
        return `${node.name === 'DurationMinOf' ? 'min_of' : 'max_of'}(${this.duration(a, d)}, ${this.duration(b, d)})`;
      }
      case 'DurationExpr':
      case 'OffsetDurationExpr':
        break;
      default:
        throw unsupported(node);
    }
    // A DurationExpr or OffsetDurationExpr: one primary, a unary sign and operand, or a binary operation.
    if (c.length === 1) {
      const inner = this.duration(c[0], d);
      return c[0].name === 'DurationExpr' ? `(${inner})` : inner;
    }
    if (c.length === 2) {
      const operand = this.duration(c[1], d);
      // `-5m` stays `-5m` (what Prometheus 2 accepts after `offset`); anything else is parenthesised.
      return `${this.unaryOperator(c[0])}${NUMBER.test(operand) ? operand : `(${operand})`}`;
    }
    const [left, op, right] = c;
    const symbol = op && BINARY_OPERATORS[op.name];
    if (c.length !== 3 || !left || !right || !symbol || !'^*/%+-'.includes(symbol)) throw unsupported(node);
    return `(${this.duration(left, d)}) ${symbol} (${this.duration(right, d)})`;
  }
}
